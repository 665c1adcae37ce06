"""The locked environments (locks/, written by scripts/lock.sh): every requirement of pyproject.toml,
extras included, met by the lock that carries it; every pin hashed; the CUDA and the cluster nodes'
locks resolved again from PyPI (not installed) to the same versions, and to the CPU lock's beside torch's build."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)")
# what each lock carries beside the project's own dependencies
LOCK_EXTRAS = {"cpu": ("test",), "cuda": ("test",), "node": ("cluster", "mlflow", "wandb")}
# the environment every lock is resolved for (scripts/lock.sh): CPython 3.11 on Linux x86_64
LOCKED_FOR = default_environment() | {
    "python_version": "3.11",
    "python_full_version": "3.11.0",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
}


def _pins(lock: Path) -> dict[str, tuple[Version, int]]:
    """Each package of ``lock``: its pinned version and how many hashes the pin carries."""
    pins: dict[str, tuple[Version, int]] = {}
    name = None
    for line in lock.read_text().splitlines():
        if match := PIN.match(line):
            name = canonicalize_name(match.group(1))
            assert name not in pins, f"{lock.name}: {name} pinned twice"
            pins[name] = (Version(match.group(2)), 0)
        elif line.strip().startswith("--hash=sha256:") and name is not None:
            pins[name] = (pins[name][0], pins[name][1] + 1)
    return pins


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


@pytest.mark.parametrize("lock", sorted(LOCK_EXTRAS))
def test_every_requirement_of_pyproject_is_met_by_the_lock_and_every_pin_is_hashed(lock):
    pins = _pins(ROOT / "locks" / f"{lock}.txt")
    assert all(hashes >= 1 for _, hashes in pins.values()), [n for n, (_, h) in pins.items() if not h]
    project = _pyproject()
    wanted = [
        *project["dependencies"],
        *(r for extra in LOCK_EXTRAS[lock] for r in project["optional-dependencies"][extra]),
    ]
    for text in wanted:
        requirement = Requirement(text)
        if requirement.marker is not None and not requirement.marker.evaluate(LOCKED_FOR):
            continue
        name = canonicalize_name(requirement.name)
        assert name in pins, f"locks/{lock}.txt lacks {text}: run scripts/lock.sh"
        version = pins[name][0]
        assert requirement.specifier.contains(version, prereleases=True), f"locks/{lock}.txt: {name} {version} ∉ {text}"


def test_every_extra_is_in_a_lock_and_the_locks_hold_the_builds_they_are_named_for():
    extras = _pyproject()["optional-dependencies"]
    carried = {extra for extras in LOCK_EXTRAS.values() for extra in extras}
    # faiss's requirement is in the test extra, which the cpu and cuda locks carry (checked above)
    assert set(extras) - carried == {"faiss"} and set(extras["faiss"]) <= set(extras["test"])
    cpu, cuda, node = (_pins(ROOT / "locks" / f"{lock}.txt") for lock in ("cpu", "cuda", "node"))
    assert cpu["torch"][0].local == "cpu" and not any(name.startswith("nvidia-") for name in cpu)
    assert cuda["torch"][0] == node["torch"][0] == Version(cpu["torch"][0].public)  # one torch, two builds
    assert {"nvidia-cudnn-cu13", "nvidia-nccl-cu13"} <= set(cuda) & set(node)  # CUDA 13: a driver of 580 or later
    assert "boto3" in node and not {"pytest", "moto", "ruff"} & set(node)  # the runtime and the launcher, no tests
    # doctune installs with --no-build-isolation: its build backend is in every lock
    build = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    assert build == ["setuptools>=77"] and 'build_backend="setuptools>=77"' in (ROOT / "scripts/lock.sh").read_text()
    assert all("setuptools" in pins for pins in (cpu, cuda, node))
    for other in (cuda, node):  # the same versions beside torch's builds: a node runs what was tested
        shared = set(cpu) & set(other) - {"torch"}
        assert {n: cpu[n][0] for n in shared} == {n: other[n][0] for n in shared}


@pytest.mark.parametrize("lock", ["cuda", "node"])
def test_a_gpu_lock_resolves_again_from_pypi_to_the_same_versions(tmp_path, lock):
    """What a GPU machine (``cuda``) and every cluster node (``node``) install is resolved here, not
    installed (no CUDA wheel downloaded): scripts/lock.sh run for that lock alone, in a copy of the
    project holding it, gives the lock's versions."""
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    assert uv is not None, "uv is missing: it is in the test extra (pip install -e .[test])"
    for name in ("pyproject.toml", "scripts/lock.sh", f"locks/{lock}.txt"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
    done = subprocess.run(
        ["bash", str(tmp_path / "scripts" / "lock.sh")],
        env={**os.environ, "UV": uv, "DOCTUNE_LOCKS": lock},
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    again, committed = _pins(tmp_path / "locks" / f"{lock}.txt"), _pins(ROOT / "locks" / f"{lock}.txt")
    assert {n: v for n, (v, _) in again.items()} == {n: v for n, (v, _) in committed.items()}
