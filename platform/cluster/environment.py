"""What a search ran on, recorded in ``search.json`` and shown on the report, so two runs can be told
apart later: package versions, the git commit, Python, the OS, the CPU, the GPUs and CUDA.

Read on the driver (the head node), and, on a Ray cluster of several nodes, on every live node too
(``nodes``: Python, torch, CUDA and the GPUs per node id), since a node's installation is its own.
"""

from __future__ import annotations

import os
from importlib import metadata
from pathlib import Path

import platform  # the package re-exports the standard library's platform functions
from doctune_core.nodes import live_nodes, on_every_node, this_node
from doctune_core.provenance import git_commit

ROOT = Path(__file__).resolve().parent.parent  # the checkout (or installed tree) this driver runs from

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
)  # and each tracker's client library (``platform.tracking.trackers``)


def environment(root: Path) -> dict:
    """The environment block of ``search.json``."""
    driver = this_node()
    return {
        "python": platform.python_version(),
        "os": f"{platform.system()} {platform.release()} ({platform.machine()})",
        "cpu": {"model": cpu_model(), "count": os.cpu_count()},
        "gpu": driver["gpu"],
        "nodes": _nodes(driver),
        "git_commit": git_commit(root),
        "packages": {name: version for name in (*PACKAGES, *_tracker_packages()) if (version := _version(name))},
    }


def _nodes(driver: dict) -> dict[str, dict]:
    """Node id → what that node runs (``doctune_core.nodes.this_node``). Asked of each live node on a
    cluster of several; on one node (or without Ray) the driver's own answer stands for it."""
    nodes = live_nodes()
    if len(nodes) < 2:
        return {nodes[0]["NodeID"] if nodes else "driver": driver}
    return on_every_node(this_node)


def _tracker_packages() -> list[str]:
    """The distributions that install each tracker's client library (``mlflow`` may come from
    ``mlflow-skinny``): those installed here, else the module's own name."""
    from platform.spec.trackers import TRACKERS

    providers = metadata.packages_distributions()
    modules = [TRACKERS[name].package for name in TRACKERS]
    return [distribution for module in modules for distribution in providers.get(module, [module])]


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def cpu_model() -> str:
    """The processor's model name, as the system gives it."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"
