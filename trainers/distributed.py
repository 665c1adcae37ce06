"""What the ranks of a Train worker group share: embeddings gathered for in-batch negatives, and
agreement on whether the loss is still finite."""

from __future__ import annotations

import torch
import torch.distributed as dist


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
