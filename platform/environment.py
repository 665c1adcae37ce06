"""What a search ran on, recorded in ``search.json`` and shown on the report, so two runs can be told
apart later: package versions, the git commit, Python, the OS, the CPU, the GPUs and CUDA.

Read on the driver (the head node); a cluster's workers run the same installation (the cluster
files install the project the same way on every node).
"""

from __future__ import annotations

import os
import subprocess
from importlib import metadata
from pathlib import Path

import platform  # the package re-exports the standard library's platform functions

PACKAGES = (
    "doctune",
    "torch",
    "ray",
    "transformers",
    "optuna",
    "numpy",
    "scikit-learn",
    "pyarrow",
    "spacy",
    "sentence-transformers",
    "mlflow",
    "wandb",
)


def environment(root: Path) -> dict:
    """The environment block of ``search.json``."""
    return {
        "python": platform.python_version(),
        "os": f"{platform.system()} {platform.release()} ({platform.machine()})",
        "cpu": {"model": _cpu_model(), "count": os.cpu_count()},
        "gpu": _gpus(),
        "git_commit": _git_commit(root),
        "packages": {name: version for name in PACKAGES if (version := _version(name))},
    }


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _git_commit(root: Path) -> str | None:
    """The checkout's commit, with ``-dirty`` when files differ from it; None outside a checkout."""
    try:
        commit = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return commit + ("-dirty" if dirty else "")


def _gpus() -> dict:
    """The driver's GPUs (model, memory), CUDA's version, and the NVIDIA driver's where it answers."""
    import torch

    devices = [torch.cuda.get_device_properties(i) for i in range(torch.cuda.device_count())]
    driver = None
    if devices:
        try:
            driver = (
                subprocess.run(
                    ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                    capture_output=True,
                    text=True,
                    timeout=10,
                    check=True,
                )
                .stdout.splitlines()[0]
                .strip()
            )
        except (OSError, subprocess.SubprocessError, IndexError):
            driver = None
    return {
        "count": len(devices),
        "models": [d.name for d in devices],
        "memory_gib": [round(d.total_memory / 2**30, 1) for d in devices],
        "cuda": torch.version.cuda,
        "driver": driver,
    }
