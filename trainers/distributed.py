"""What the ranks of a Train worker group share: their device and collective backend, embeddings
gathered for in-batch negatives, agreement on whether the loss is still finite, and where each ran.

A worker that holds a GPU torch cannot see stops with what to fix; doctune never falls back to the
CPU on its own.
"""

from __future__ import annotations

import socket

import torch
import torch.distributed as dist

from doctune_core.run_files import RunFiles
from trainers.checkpoint import trial_path

PLACEMENT_FILE = "placement.json"


def collective_backend(use_gpu: bool) -> str:
    return "nccl" if use_gpu else "gloo"


def training_device() -> torch.device:
    """This worker's device: the GPU Ray assigned it, else the CPU."""
    import ray
    import ray.train.torch

    device = ray.train.torch.get_device()
    if device.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(
            f"this worker holds GPU {ray.get_gpu_ids()} on {socket.gethostname()}, but torch {torch.__version__} "
            "finds no CUDA device: install a CUDA build of torch there (scripts/setup.sh does where a GPU is "
            "present)"
        )
    return device


def record_placement(files: RunFiles, trial_id: str, device: torch.device) -> None:
    """Write where every rank of this worker group runs (host, node, Ray's GPU ids, torch device) to
    the trial's ``placement.json``, from rank 0; a restarted worker group writes it again."""
    import ray

    here = {
        "host": socket.gethostname(),
        "node_id": ray.get_runtime_context().get_node_id(),
        "gpu_ids": [str(gpu) for gpu in ray.get_gpu_ids()],
        "device": str(device),
    }
    ranks = [here]
    if dist.is_initialized():
        ranks = [None] * dist.get_world_size()
        dist.all_gather_object(ranks, here)
    if not dist.is_initialized() or dist.get_rank() == 0:
        files.write_json(trial_path(trial_id, PLACEMENT_FILE), {"ranks": ranks})


def world_size() -> int:
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def gather(local: torch.Tensor) -> torch.Tensor:
    """Concatenate ``local`` (shape ``(n, d)``, equal ``n`` on every rank) from all ranks, in rank
    order, keeping the autograd graph of this rank's slot (the others are constants).

    With a loss computed on the gathered batch, each rank's backward yields the gradient through
    its own embeddings only; DDP averages those, giving ``1 / world_size`` of the full-batch
    gradient. Multiply the loss by ``world_size()`` before backward for the exact gradient.
    This is the SimCSE cross-GPU scheme (Gao et al. 2021, public code).
    """
    size = world_size()
    if size == 1:
        return local
    slots = [torch.empty_like(local) for _ in range(size)]
    dist.all_gather(slots, local.detach().contiguous())
    slots[dist.get_rank()] = local
    return torch.cat(slots, dim=0)


def finite_everywhere(loss: torch.Tensor) -> bool:
    """Whether the loss is finite on every rank (so that all ranks stop together)."""
    flag = torch.isfinite(loss.detach()).to(torch.float32).reshape(1)
    if dist.is_initialized():
        dist.all_reduce(flag, op=dist.ReduceOp.MIN)
    return bool(flag.item())
