"""Every GPU node checks its NVIDIA driver before Ray offers its GPUs (cluster/gpu_driver.sh): on
each route (cluster.yaml's workers, KubeRay's GPU group; Slurm's in tests/cluster/test_slurm.py),
run here with a stand-in ``nvidia-smi`` that answers the driver's version (no GPU here to ask)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT

SCRIPT = ROOT / "cluster" / "gpu_driver.sh"
IMAGE_ROOT = "/opt/doctune"  # the image's WORKDIR, where COPY . . puts the checkout (Dockerfile)


def _path_with(tmp_path: Path, driver: str | None, *, ray_log: Path | None = None) -> str:
    """PATH with a stand-in ``nvidia-smi`` answering ``driver`` (none on PATH where it is None) and,
    with ``ray_log``, a stand-in ``ray`` that writes its arguments there; then the system's tools."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    if driver is not None:
        (bin_dir / "nvidia-smi").write_text(f"#!/bin/sh\necho '{driver}'\n")
        (bin_dir / "nvidia-smi").chmod(0o755)
    if ray_log is not None:
        (bin_dir / "ray").write_text(f'#!/bin/sh\necho "$*" >> {ray_log}\n')
        (bin_dir / "ray").chmod(0o755)
    system = [d for d in os.environ["PATH"].split(os.pathsep) if not (Path(d) / "nvidia-smi").exists()]
    return os.pathsep.join([str(bin_dir), *system])


def _in_the_image(command: str) -> str:
    """A command written for the image, run from this checkout (the image's copy of it)."""
    assert re.search(r"^WORKDIR /opt/doctune$", (ROOT / "Dockerfile").read_text(), re.M)
    assert re.search(r"^COPY \. \.$", (ROOT / "Dockerfile").read_text(), re.M)
    return command.replace(IMAGE_ROOT, str(ROOT))


@pytest.mark.parametrize(
    ("driver", "passes", "said"),
    [
        ("580.95.05", True, "NVIDIA driver 580.95.05 (CUDA 13.0 needs 580 or later)"),
        ("550.54.15", False, "NVIDIA driver '550.54.15'; doctune's torch (CUDA 13.0) needs NVIDIA driver 580 or later"),
        ("", False, "NVIDIA driver 'none'"),  # nvidia-smi there, answering no driver
        (None, False, "no NVIDIA driver answers (nvidia-smi not found)"),
    ],
)
def test_the_check_passes_a_driver_cuda_13_runs_on_and_names_any_other(tmp_path, driver, passes, said):
    done = subprocess.run(
        ["bash", str(SCRIPT)],
        env={"PATH": _path_with(tmp_path, driver), "HOSTNAME": "gpu-node-7"},
        capture_output=True,
        text=True,
    )
    assert (done.returncode == 0) == passes, done.stderr
    assert said in (done.stdout if passes else done.stderr) and "gpu-node-7" in done.stdout + done.stderr


def _start_commands(commands: list[str], tmp_path: Path, driver: str) -> tuple[int, str, list[str]]:
    """``commands`` run in order, each in its own shell, stopping at the first that fails (as Ray's
    launcher runs a node's start commands): the exit status, the error output and ``ray``'s calls."""
    ray_log = tmp_path / "ray.log"
    env = {"PATH": _path_with(tmp_path, driver, ray_log=ray_log), "HOSTNAME": "ip-10-0-0-7", "RAY_HEAD_IP": "10.0.0.1"}
    for command in commands:
        done = subprocess.run(["bash", "-c", _in_the_image(command)], env=env, capture_output=True, text=True)
        if done.returncode:
            break
    calls = ray_log.read_text().splitlines() if ray_log.exists() else []
    return done.returncode, done.stderr, calls


@pytest.mark.parametrize("driver", ["550.54.15", "580.95.05"])
def test_the_workers_start_commands_start_ray_only_on_a_driver_that_runs_cuda_13(tmp_path, driver):
    commands = yaml.safe_load((ROOT / "cluster.yaml").read_text())["worker_start_ray_commands"]
    assert "gpu_driver.sh" in commands[0]  # first, before Ray is stopped or started
    status, error, calls = _start_commands(commands, tmp_path, driver)
    if driver.startswith("550"):
        assert status == 1 and calls == [] and "ip-10-0-0-7: NVIDIA driver '550.54.15'" in error
        assert "needs NVIDIA driver 580 or later" in error
    else:
        assert status == 0 and [call.split()[:2] for call in calls] == [["stop"], ["start", "--address=10.0.0.1:6379"]]


def test_the_kuberay_gpu_workers_check_their_driver_in_an_init_container(tmp_path):
    manifest = list(yaml.safe_load_all((ROOT / "cluster" / "kuberay.yaml").read_text()))
    (rayjob,) = [document for document in manifest if document and document.get("kind") == "RayJob"]
    cluster_image = yaml.safe_load((ROOT / "cluster.yaml").read_text())["docker"]["image"]
    for group in rayjob["spec"]["rayClusterSpec"]["workerGroupSpecs"]:
        spec = group["template"]["spec"]
        (worker,) = spec["containers"]
        (check,) = spec["initContainers"]  # runs to its end before the worker's container starts
        assert check["image"] == worker["image"] == cluster_image
        # the device plugin shows a container the GPUs it asks for: the worker's
        gpus = worker["resources"]["limits"]["nvidia.com/gpu"]
        assert check["resources"]["limits"]["nvidia.com/gpu"] == gpus
        command = " ".join(check["command"])
        old = subprocess.run(
            ["bash", "-c", _in_the_image(command)],
            env={"PATH": _path_with(tmp_path, "570.86.10"), "HOSTNAME": "gpu-pod-0"},
            capture_output=True,
            text=True,
        )
        assert old.returncode == 1 and "gpu-pod-0: NVIDIA driver '570.86.10'" in old.stderr
