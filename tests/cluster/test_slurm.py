"""cluster/slurm.sbatch run as Slurm would run it, on two stand-in hosts of this machine.

Stand-ins for ``scontrol`` (the job's node list, two hosts) and ``srun`` (a command run "on" a host)
come first on PATH. The batch script runs on the first host, in a mount namespace of its own with a
fresh Ray temp directory (``/tmp/ray``, a tmpfs); ``srun`` on that host runs its command there, and
on the second host in a nested namespace with a tmpfs of its own over ``/tmp/ray``: two real
``ray start`` nodes that share no Ray files, as two machines would not. The hosts share this
machine's network, so the stand-in gives each ``ray start`` ports of its own and the second host
the address 127.0.0.2. The test watches the two raylets while the search's dry run plans on them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import torch

import platform
from doctune_core.data import cache_dir
from tests.conftest import ROOT, closed_port

pytestmark = pytest.mark.ray

SCRIPT = ROOT / "cluster" / "slurm.sbatch"
HOSTS = {"gpu-a1": "127.0.0.1", "gpu-a2": "127.0.0.2"}
NODE_CPUS, NODE_GPUS = 48, 4  # declared by the job (--cpus-per-task, --gpus-per-node), not present

SCONTROL = """#!/bin/sh
# stand-in: `scontrol show hostnames LIST` prints the job's hosts, one a line
[ "$1 $2" = "show hostnames" ] || { echo "stand-in scontrol: unexpected $*" >&2; exit 1; }
printf '%s\\n' {hosts}
"""

SRUN = """#!{python}
# stand-in: `srun [OPTIONS] -w HOST COMMAND...` runs COMMAND on HOST (see the test's docstring), each
# step's options and command appended to steps.jsonl beside it
import json, os, socket, sys

HOSTS, BATCH_HOST = {hosts!r}, {batch_host!r}

def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]

args = sys.argv[1:]
host, options = None, []
while args[0].startswith("-"):
    option = args.pop(0)
    if option == "-w":
        host = args.pop(0)
    elif option.startswith("--nodelist="):
        host = option.split("=", 1)[1]
    else:
        options.append(option)
assert host in HOSTS, f"stand-in srun: unknown host {{host}}"
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "steps.jsonl"), "a") as steps:
    steps.write(json.dumps({{"host": host, "options": options, "command": args[:2]}}) + "\\n")
if args[:2] == ["hostname", "--all-ip-addresses"]:
    print(HOSTS[host], "fd00::1")
    sys.exit(0)
if args[:2] == ["ray", "start"]:  # one network for both hosts: ports of their own
    args += [f"--dashboard-agent-listen-port={{free_port()}}", f"--metrics-export-port={{free_port()}}"]
    if "--head" in args:
        args += [f"--ray-client-server-port={{free_port()}}", f"--dashboard-port={{free_port()}}"]
    else:
        args += [f"--node-ip-address={{HOSTS[host]}}"]
if host != BATCH_HOST:
    args = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
            'mount -t tmpfs tmpfs /tmp/ray && exec "$@"', "sh", *args]
os.execvp(args[0], args)
"""


def _stand_ins(directory: Path, driver: str = "580.95.05") -> Path:
    """``scontrol``, ``srun`` and each node's ``nvidia-smi``, answering ``driver`` as its version."""
    directory.mkdir()
    (directory / "scontrol").write_text(SCONTROL.replace("{hosts}", " ".join(HOSTS)))
    (directory / "srun").write_text(SRUN.format(python=sys.executable, hosts=HOSTS, batch_host=next(iter(HOSTS))))
    (directory / "nvidia-smi").write_text(f"#!/bin/sh\necho '{driver}'\n")
    for tool in ("scontrol", "srun", "nvidia-smi"):
        (directory / tool).chmod(stat.S_IRWXU)
    return directory


def _job_environment(tmp_path: Path, port: int, driver: str = "580.95.05") -> dict[str, str]:
    """The batch script's environment as Slurm gives it, the stand-ins first on PATH."""
    env = {name: value for name, value in os.environ.items() if not name.startswith(("RAY_", "SLURM_"))}
    return env | {
        "PATH": f"{_stand_ins(tmp_path / 'bin', driver)}:{os.environ['PATH']}",
        "HOME": str(tmp_path / "home"),  # the token is made there, on "the shared file system"
        "DOCTUNE_CACHE": str(cache_dir()),  # holds default_corpus
        "DOCTUNE_RAY_PORT": str(port),
        "SLURM_JOB_NODELIST": "gpu-a[1-2]",
        "SLURM_SUBMIT_DIR": str(ROOT),
        "SLURM_CPUS_PER_TASK": str(NODE_CPUS),
        "SLURM_GPUS_PER_NODE": f"a100:{NODE_GPUS}",
    }


def _processes_of(port: int) -> list[psutil.Process]:
    """This cluster's Ray processes: each names its GCS (``ray start``, the raylet and the workers by
    the GCS's address, the GCS itself by its port)."""
    names_the_gcs = re.compile(rf"(--address|--gcs[-_]address)=[\d.]+:{port}\b|--gcs_server_port={port}\b")
    return [p for p in psutil.process_iter(["cmdline"]) if names_the_gcs.search(" ".join(p.info["cmdline"] or []))]


def _raylets(port: int) -> dict[int, tuple[int, str | None]]:
    """Each live raylet of this cluster: its mount namespace and the RAY_AUTH_MODE it runs with."""
    raylets = {}
    for process in _processes_of(port):
        try:
            if process.name() != "raylet":
                continue
            namespace = os.stat(f"/proc/{process.pid}/ns/mnt").st_ino
            raylets[process.pid] = (namespace, process.environ().get("RAY_AUTH_MODE"))
        except (psutil.NoSuchProcess, FileNotFoundError):
            continue
    return raylets


def test_the_batch_script_brings_up_a_ray_node_per_host_and_plans_the_search_on_them(tmp_path, default_corpus):
    if shutil.which("unshare") is None or os.geteuid() != 0:
        pytest.fail("the Slurm test runs each stand-in host in a mount namespace: it needs unshare, as root")
    port = closed_port()  # free: nothing listens on it
    Path("/tmp/ray").mkdir(exist_ok=True)  # the mount point of each host's own Ray temp directory
    env = _job_environment(tmp_path, port)
    run_dir = tmp_path / "runs" / "docsplit_long"
    batch = subprocess.Popen(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c",
         'mount -t tmpfs tmpfs /tmp/ray && exec bash "$@"', "sh",
         str(SCRIPT), "docsplit_long", "--dry-run", "--run-dir", str(run_dir)],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    seen: dict[int, tuple[int, str | None]] = {}
    while batch.poll() is None:  # the raylets, looked at while the dry run plans on them
        seen |= _raylets(port)
        time.sleep(0.5)
    out, err = batch.communicate()
    assert batch.returncode == 0, err[-4000:]
    summary = json.loads(out[out.rindex("\n{\n") + 1 :])
    assert summary["resources"]["cluster_gpus"] == 2 * NODE_GPUS
    # a trial of 4 workers on each node, its GPUs declared; what each node runs, asked of each node
    assert (summary["trial_plan"]["workers_per_trial"], summary["trial_plan"]["max_concurrent"]) == (4, 2)
    nodes = summary["environment"]["nodes"]
    assert len(nodes) == 2 and {n["torch"] for n in nodes.values()} == {torch.__version__}
    assert all(n["python"] == platform.python_version() and "gpu" in n for n in nodes.values())
    assert not run_dir.exists()  # a dry run writes nothing
    # each Ray node's step asks for the node's CPUs and GPUs (a step inherits no --cpus-per-task from the
    # job since Slurm 22.05) and overlaps the steps after it
    steps = [json.loads(line) for line in (tmp_path / "bin" / "steps.jsonl").read_text().splitlines()]
    ray_steps = [step for step in steps if step["command"] == ["ray", "start"]]
    assert sorted(step["host"] for step in ray_steps) == sorted(HOSTS)
    checked = [
        step["host"] for step in steps[: steps.index(ray_steps[0])] if step["command"][-1].endswith("gpu_driver.sh")
    ]
    assert sorted(checked) == sorted(HOSTS)  # every node's driver, before any Ray node starts
    asked = {"--overlap", f"--cpus-per-task={NODE_CPUS}", f"--gpus-per-node=a100:{NODE_GPUS}"}
    assert all(asked <= set(step["options"]) for step in ray_steps), ray_steps
    # two raylets, each in a mount namespace of its own (and neither in the test's), both in token mode
    assert len(seen) == 2, seen
    namespaces = {namespace for namespace, _ in seen.values()}
    assert len(namespaces) == 2 and os.stat("/proc/self/ns/mnt").st_ino not in namespaces
    assert {mode for _, mode in seen.values()} == {"token"}
    assert (tmp_path / "home" / ".ray" / "auth_token").stat().st_mode & 0o077 == 0  # the token is yours alone
    deadline = time.monotonic() + 60  # nothing of the job's Ray is left
    while (left := _processes_of(port)) and time.monotonic() < deadline:
        time.sleep(1)
    assert not left, [" ".join(p.cmdline())[:150] for p in left if p.is_running()]


def test_a_node_whose_driver_is_too_old_stops_the_job_before_any_ray_node_starts(tmp_path):
    """Each node's ``nvidia-smi`` answers 550 (CUDA 12.4's driver): the job names every node and the
    driver doctune's torch needs, and exits before a Ray node (or the search) starts."""
    Path("/tmp/ray").mkdir(exist_ok=True)  # the mount point of each host's own Ray temp directory
    done = subprocess.run(
        ["bash", str(SCRIPT), "docsplit_long", "--dry-run"],
        cwd=tmp_path, env=_job_environment(tmp_path, closed_port(), driver="550.54.15"),
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr[-3000:]
    assert done.stderr.count("NVIDIA driver '550.54.15'; doctune's torch (CUDA 13.0) needs NVIDIA driver 580") == 2
    assert "doctune: the NVIDIA driver of gpu-a1 gpu-a2 cannot run doctune's torch" in done.stderr
    steps = [json.loads(line) for line in (tmp_path / "bin" / "steps.jsonl").read_text().splitlines()]
    assert not any(step["command"] == ["ray", "start"] for step in steps) and done.stdout == ""
