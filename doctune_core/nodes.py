"""The nodes of a Ray cluster: a function run once on each live node, what each node runs
(Python, torch, CUDA, its GPUs and the NVIDIA driver), which ``search.json`` records per node, and
the hook that tells every worker process which cluster it belongs to.

Here, not in ``platform/``, because Ray workers must unpickle what runs on them, and the driver's
``platform`` package is the standard library's module on a worker (docs/decisions/installed-command.md).
"""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Callable
from typing import Any


def set_up_worker() -> None:
    """Ray's ``worker_process_setup_hook`` for doctune's jobs: each worker process pinned to its
    own cluster (``pin_ray_address``) and logging as its driver does
    (``doctune_core.logs.configure_worker_logging``)."""
    from doctune_core.logs import configure_worker_logging

    pin_ray_address()
    configure_worker_logging()


def pin_ray_address() -> None:
    """``RAY_ADDRESS`` in each worker process is its own cluster's GCS. Ray's state API, called
    without an address inside a worker (Ray Train's placement-group cleaner asks it whether the
    Train controller lives), otherwise reads an inherited ``RAY_ADDRESS`` or looks for running GCS
    processes, and with two Ray instances on one host it fails: the cleaner's thread dies, and the
    placement group of a Train run whose controller Tune killed (a PBT pause, an ASHA stop) is
    never removed, so the trials after it wait for its CPUs."""
    import os

    import ray

    os.environ["RAY_ADDRESS"] = ray.get_runtime_context().gcs_address


def live_nodes() -> list[dict]:
    """The live nodes of the Ray cluster this process is connected to (none without Ray)."""
    import ray

    return [node for node in ray.nodes() if node["Alive"]] if ray.is_initialized() else []


def on_every_node(function: Callable[..., Any], *args: Any) -> dict[str, Any]:
    """``function(*args)`` run once on each live node by a zero-CPU task pinned there: node id →
    its answer. Nodes an autoscaler adds later are not asked."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    remote = ray.remote(num_cpus=0)(function)
    nodes = [node["NodeID"] for node in live_nodes()]
    pinned = [remote.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n, soft=False)) for n in nodes]
    return dict(zip(nodes, ray.get([task.remote(*args) for task in pinned]), strict=True))


def this_node() -> dict:
    """What this machine runs: its host name, Python, torch, CUDA, its GPUs (model, memory) and the
    NVIDIA driver where ``nvidia-smi`` answers."""
    import torch

    devices = [torch.cuda.get_device_properties(i) for i in range(torch.cuda.device_count())]
    return {
        "host": socket.gethostname(),
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "gpu": {
            "count": len(devices),
            "models": [d.name for d in devices],
            "memory_gib": [round(d.total_memory / 2**30, 1) for d in devices],
            "cuda": torch.version.cuda,
            "driver": _nvidia_driver() if devices else None,
        },
    }


def _nvidia_driver() -> str | None:
    try:
        done = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
        return done.stdout.splitlines()[0].strip()
    except (OSError, subprocess.SubprocessError, IndexError):
        return None
