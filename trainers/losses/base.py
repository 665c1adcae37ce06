"""The contrastive loss a trial runs (``ContrastiveLoss``) and the registry its modules join by name
(``CONTRASTIVE_LOSSES``); ``trainers.losses`` imports every loss module and re-exports them."""

from __future__ import annotations

import torch
import torch.nn as nn

from core.registry import Registry
from trainers.config import Hyperparameters


class ContrastiveLoss:
    """A contrastive term as a trial runs it, over this worker's pooled embeddings of the two
    views, ``a`` and ``b`` (N, d), row i of each a positive pair. ``head`` is a trainable module
    the term needs on the embeddings (run inside the model's forward, so DDP synchronises it), or
    None; its output for the 2N rows (view A's, then view B's) comes as ``head_outputs``.
    ``__call__`` returns the term and the factor its gradient is scaled by before backward: the
    world size for a term over embeddings gathered from every rank (``trainers.distributed``),
    1 for a per-rank mean."""

    min_pairs_per_worker: int = 1  # the spec refuses smaller per-worker batches
    min_pairs: int = 1  # and smaller batches across all workers

    def head(self, dim: int) -> nn.Module | None:
        return None

    def __call__(
        self, hp: Hyperparameters, a: torch.Tensor, b: torch.Tensor, head_outputs: torch.Tensor | None
    ) -> tuple[torch.Tensor, int]:
        raise NotImplementedError


CONTRASTIVE_LOSSES: Registry[type[ContrastiveLoss]] = Registry("contrastive loss")
