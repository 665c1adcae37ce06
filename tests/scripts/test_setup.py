"""scripts/setup.sh: which torch build it installs, read off the commands it would run (DOCTUNE_SETUP_PLAN=1)."""

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


def _path_without_nvidia_smi(tmp_path: Path, with_gpu: bool) -> str:
    """PATH holding only what setup.sh calls; `nvidia-smi` present exactly when `with_gpu`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for tool in ("dirname", "touch", "printf"):
        found = shutil.which(tool)
        if found:
            (bin_dir / tool).symlink_to(found)
    if with_gpu:
        smi = bin_dir / "nvidia-smi"
        smi.write_text("#!/bin/sh\nexit 0\n")
        smi.chmod(0o755)
    return str(bin_dir)


def _plan(tmp_path: Path, cpu_index: str, with_gpu: bool = False) -> tuple[list[str], str, float]:
    env = {
        "PATH": _path_without_nvidia_smi(tmp_path, with_gpu),
        "PYTHON": sys.executable,
        "DOCTUNE_TORCH_CPU_INDEX": cpu_index,
        "DOCTUNE_SETUP_PLAN": "1",
        "HOME": os.environ.get("HOME", str(tmp_path)),
    }
    began = time.monotonic()
    done = subprocess.run(
        ["/bin/bash", str(ROOT / "scripts" / "setup.sh")], env=env, capture_output=True, text=True, timeout=60
    )
    elapsed = time.monotonic() - began
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines(), done.stderr, elapsed


def _torch_installs(commands: list[str]) -> list[str]:
    return [c for c in commands if " pip install " in c and "torch==" in c]


def test_without_a_gpu_torch_comes_from_the_cpu_index_when_it_answers(tmp_path: Path, wheel_index: str) -> None:
    commands, stderr, _ = _plan(tmp_path, wheel_index)
    assert _torch_installs(commands) == [
        f"{ROOT}/.venv/bin/python -m pip install --quiet torch==2.13.0 --index-url {wheel_index}"
    ]
    assert "CPU build" in stderr
    # torch comes before the project, so the project's own install finds it satisfied
    assert commands.index(_torch_installs(commands)[0]) < next(
        i for i, c in enumerate(commands) if c.endswith(f"-e {ROOT}[test]")
    )


def test_an_unreachable_cpu_index_falls_back_in_seconds_and_says_so(tmp_path: Path) -> None:
    commands, stderr, elapsed = _plan(tmp_path, f"http://127.0.0.1:{_closed_port()}/whl/cpu")
    assert _torch_installs(commands) == [f"{ROOT}/.venv/bin/python -m pip install --quiet torch==2.13.0"]
    assert "cannot be reached" in stderr and "configured index" in stderr
    assert elapsed < 15  # the probe is bounded at 5 s; a closed port or unknown host fails at once


def test_a_gpu_machine_leaves_torch_to_the_projects_range(tmp_path: Path, wheel_index: str) -> None:
    commands, stderr, _ = _plan(tmp_path, wheel_index, with_gpu=True)
    assert _torch_installs(commands) == []
    assert commands[-1] == f"{ROOT}/.venv/bin/python -m pip install --quiet -e {ROOT}[test]"
    assert "CPU build" not in stderr
