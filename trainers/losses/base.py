"""The contrastive loss a trial runs (``ContrastiveLoss``) and the registry its modules join by name
(``CONTRASTIVE_LOSSES``); ``trainers.losses`` imports every loss module and re-exports them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn as nn

from doctune_core.fields import constraint
from doctune_core.registry import Registry
from trainers.config import NoSettings


@dataclass(frozen=True)
class TemperatureSettings:
    """The softmax temperature of a loss over cosine similarities (cosine / tau)."""

    temperature: float = field(
        default=0.05,
        metadata=constraint("contrastive temperature tau (cosine / tau)", 0.0, 10.0, low_open=True, perturbable=True),
    )


class ContrastiveLoss:
    """A contrastive term as a trial runs it, over this worker's pooled embeddings of the two
        views, ``a`` and ``b`` (N, d), row i of each a positive pair. ``head`` is a trainable module
        the term needs on the embeddings (run inside the model's forward, so DDP synchronises it), or
        None; its output for the 2N rows (view A's, then view B's) comes as ``head_outputs``.
        ``__call__`` returns the term and the factor its gradient is scaled by before backward: the
        world size for a term over embeddings gathered from every rank (``trainers.distributed``),
        1 for a per-rank mean. ``settings`` is the frozen dataclass of the loss's own settings (as a
        recipe's: ``trainers.pairs.base.Recipe``); ``__call__`` receives their values, nothing else. A
    loss with ``takes_hard_negatives`` also receives the batch's hard negatives (``trainers.
    hard_negatives``) as ``negatives`` (M, d); a spec that gives hard negatives to another is refused."""

    min_pairs_per_worker: int = 1  # the spec refuses smaller per-worker batches
    min_pairs: int = 1  # and smaller batches across all workers
    settings: type = NoSettings
    takes_hard_negatives: bool = False

    def head(self, dim: int) -> nn.Module | None:
        return None

    def __call__(
        self, settings: Any, a: torch.Tensor, b: torch.Tensor, head_outputs: torch.Tensor | None
    ) -> tuple[torch.Tensor, int]:
        raise NotImplementedError


CONTRASTIVE_LOSSES: Registry[type[ContrastiveLoss]] = Registry("contrastive loss")
