"""scripts/setup.sh: which lock it installs, and that it installs nothing else, read off the commands it
would run (DOCTUNE_SETUP_PLAN=1) in a copy of the checkout's setup files (so its .venv is the copy's)."""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """What setup.sh reads, copied: the script, the GPU nodes' driver check it sources, the locks and
    pyproject.toml; no .venv yet."""
    copy = tmp_path / "doctune"
    (copy / "scripts").mkdir(parents=True)
    (copy / "cluster").mkdir()
    shutil.copy2(ROOT / "scripts" / "setup.sh", copy / "scripts" / "setup.sh")
    shutil.copy2(ROOT / "cluster" / "gpu_driver.sh", copy / "cluster" / "gpu_driver.sh")
    shutil.copytree(ROOT / "locks", copy / "locks")
    shutil.copy2(ROOT / "pyproject.toml", copy / "pyproject.toml")
    return copy


@pytest.fixture
def wheel_index(tmp_path: Path) -> Iterator[str]:
    """A real HTTP server holding a `torch/` page, as a PEP 503 index does."""
    (tmp_path / "whl" / "cpu" / "torch").mkdir(parents=True)
    (tmp_path / "whl" / "cpu" / "torch" / "index.html").write_text("<html><body></body></html>")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/whl/cpu"
    server.shutdown()


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _bare_path(tmp_path: Path, with_gpu: bool, driver: str = "580.95.05") -> str:
    """PATH holding only what setup.sh calls; `nvidia-smi` present exactly when `with_gpu`, a stand-in
    answering ``driver`` as the driver's version (no GPU here to ask)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for tool in ("dirname", "cat", "find", "rm", "printf"):
        found = shutil.which(tool)
        if found and not (bin_dir / tool).exists():
            (bin_dir / tool).symlink_to(found)
    smi = bin_dir / "nvidia-smi"
    smi.unlink(missing_ok=True)
    if with_gpu:
        smi.write_text(f"#!/bin/sh\necho '{driver}'\n")
        smi.chmod(0o755)
    return str(bin_dir)


def _run(
    checkout: Path, cpu_index: str, with_gpu: bool = False, *, driver: str = "580.95.05", **env: str
) -> subprocess.CompletedProcess:
    env = {
        "PATH": _bare_path(checkout.parent, with_gpu, driver),
        "PYTHON": sys.executable,
        "DOCTUNE_TORCH_CPU_INDEX": cpu_index,
        "DOCTUNE_SETUP_PLAN": "1",
        "HOME": os.environ.get("HOME", str(checkout.parent)),
        **env,
    }
    return subprocess.run(
        ["/bin/bash", str(checkout / "scripts" / "setup.sh")], env=env, capture_output=True, text=True, timeout=60
    )


def _plan(
    checkout: Path, cpu_index: str, with_gpu: bool = False, *, driver: str = "580.95.05", **env: str
) -> tuple[list[str], str, float]:
    began = time.monotonic()
    done = _run(checkout, cpu_index, with_gpu, driver=driver, **env)
    elapsed = time.monotonic() - began
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines(), done.stderr, elapsed


def _installs(commands: list[str]) -> list[str]:
    return [c for c in commands if " pip install " in c]


def _lock_install(checkout: Path, lock: str, *args: str) -> str:
    pip = f"{checkout}/.venv/bin/python -m pip install --quiet"
    return " ".join([pip, "--require-hashes --no-deps -r", f"{checkout}/locks/{lock}.txt", *args])


def _project(checkout: Path) -> str:
    """What every plan ends with: doctune itself, editable, with nothing but what the lock brought."""
    return f"{checkout}/.venv/bin/python -m pip install --quiet --no-deps --no-build-isolation -e {checkout}"


def test_without_a_gpu_the_cpu_lock_installs_with_torch_from_the_cpu_index(checkout: Path, wheel_index: str) -> None:
    commands, stderr, _ = _plan(checkout, wheel_index)
    assert _installs(commands) == [_lock_install(checkout, "cpu", "--extra-index-url", wheel_index), _project(checkout)]
    assert "CPU build" in stderr


def test_an_unreachable_cpu_index_falls_back_in_seconds_and_says_so(checkout: Path) -> None:
    commands, stderr, elapsed = _plan(checkout, f"http://127.0.0.1:{_closed_port()}/whl/cpu")
    assert _installs(commands) == [_lock_install(checkout, "cpu"), _project(checkout)]
    assert "cannot be reached" in stderr and "configured index" in stderr
    assert elapsed < 15  # the probe is bounded at 5 s; a closed port or unknown host fails at once


def test_a_gpu_machine_installs_the_cuda_lock(checkout: Path, wheel_index: str) -> None:
    commands, stderr, _ = _plan(checkout, wheel_index, with_gpu=True)
    assert _installs(commands) == [_lock_install(checkout, "cuda"), _project(checkout)]
    assert "NVIDIA driver 580.95.05 found" in stderr and "CPU build" not in stderr


def test_a_driver_older_than_cuda_13_needs_stops_before_installing_anything(checkout: Path, wheel_index: str) -> None:
    for driver in ("550.54.15", ""):  # too old; nvidia-smi on PATH but answering no driver
        done = _run(checkout, wheel_index, with_gpu=True, driver=driver)
        assert done.returncode == 2 and done.stdout == "", driver  # no install command planned
        assert f"NVIDIA driver '{driver or 'none'}'" in done.stderr and "needs 580 or later" in done.stderr
        assert "DOCTUNE_LOCK=cpu" in done.stderr


def test_doctune_lock_chooses_the_lock_whatever_the_machine_has(checkout: Path, wheel_index: str) -> None:
    # a GPU machine whose driver is too old, asking for the CPU build
    commands, stderr, _ = _plan(checkout, wheel_index, with_gpu=True, driver="550.54.15", DOCTUNE_LOCK="cpu")
    assert _installs(commands) == [_lock_install(checkout, "cpu", "--extra-index-url", wheel_index), _project(checkout)]
    assert "DOCTUNE_LOCK=cpu" in stderr
    # a login node or an image build without a GPU, for GPU nodes
    commands, stderr, _ = _plan(checkout, wheel_index, DOCTUNE_LOCK="cuda")
    assert _installs(commands) == [_lock_install(checkout, "cuda"), _project(checkout)]
    done = _run(checkout, wheel_index, DOCTUNE_LOCK="rocm")
    assert done.returncode == 2 and "DOCTUNE_LOCK=rocm; set it to cpu or cuda" in done.stderr


def test_a_python_the_locks_are_not_for_is_refused_with_what_to_set(checkout: Path) -> None:
    other = checkout.parent / "python3.12"
    other.write_text(f'#!/bin/sh\nif [ "$1" = -c ]; then echo 3.12; else exec {sys.executable} "$@"; fi\n')
    other.chmod(0o755)
    env = {"PATH": _bare_path(checkout.parent, False), "PYTHON": str(other), "DOCTUNE_SETUP_PLAN": "1"}
    done = subprocess.run(
        ["/bin/bash", str(checkout / "scripts" / "setup.sh")], env=env, capture_output=True, text=True
    )
    assert done.returncode == 2 and done.stdout == ""
    assert "Python 3.12; the locks in locks/ are for Python 3.11" in done.stderr and "PYTHON=" in done.stderr


def _installed(checkout: Path, stamp: str) -> None:
    """A .venv as setup.sh leaves it, its stamp reading ``stamp`` (empty: a stamp from before it named its lock)."""
    (checkout / ".venv" / "bin").mkdir(parents=True)
    (checkout / ".venv" / "bin" / "python").symlink_to(sys.executable)
    (checkout / ".venv" / ".doctune-installed").write_text(stamp)


def test_an_installed_venv_keeps_its_lock_until_doctune_lock_names_the_other(checkout: Path, wheel_index: str) -> None:
    _installed(checkout, "cpu\n")
    # up to date: nothing to do, GPU or not
    commands, _, _ = _plan(checkout, wheel_index, with_gpu=True)
    assert commands == []
    # a changed pyproject.toml reinstalls the lock .venv was made with, not the one the machine suggests
    time.sleep(0.01)
    (checkout / "pyproject.toml").touch()
    commands, stderr, _ = _plan(checkout, wheel_index, with_gpu=True)
    assert _installs(commands) == [_lock_install(checkout, "cpu", "--extra-index-url", wheel_index), _project(checkout)]
    assert "the lock .venv was made with" in stderr
    # the other lock asked for: .venv made anew, so no CUDA library sits beside the CPU torch
    commands, stderr, _ = _plan(checkout, wheel_index, DOCTUNE_LOCK="cuda")
    venv = checkout / ".venv"
    assert commands == [
        f"rm -rf {venv}",
        f"{sys.executable} -m venv {venv}",
        _lock_install(checkout, "cuda"),
        _project(checkout),
    ]
    assert "holds locks/cpu.txt; making it anew for locks/cuda.txt" in stderr


def test_a_stamp_naming_no_lock_takes_doctune_lock_in_place(checkout: Path, wheel_index: str) -> None:
    _installed(checkout, "")
    assert _plan(checkout, wheel_index)[0] == []  # nothing asked, nothing done
    commands, _, _ = _plan(checkout, wheel_index, DOCTUNE_LOCK="cpu")
    assert commands == [_lock_install(checkout, "cpu", "--extra-index-url", wheel_index), _project(checkout)]
