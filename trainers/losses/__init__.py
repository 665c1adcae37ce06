"""Loss terms, one per module, each documented with its inputs, shapes, formula and paper.

The contrastive losses a spec's ``hyperparameters.loss`` names are ``ContrastiveLoss`` classes
registered by name in their modules (``CONTRASTIVE_LOSSES``); adding one is one module here
(docs/decisions.md, "Adding a recipe, a loss or a task"). ``trainers.training_loss`` combines the
chosen one with the MLM and Bregman terms into a trial's training loss.
"""

from __future__ import annotations

import torch
import torch.nn as nn

from core.registry import Registry, import_plugins
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

import_plugins(__name__, __path__)

from trainers.losses.bregman import BregmanHead, active_subnetworks, bregman_divergence, bregman_loss  # noqa: E402
from trainers.losses.deca_nt_xent import deca_nt_xent  # noqa: E402
from trainers.losses.info_nce import info_nce  # noqa: E402
from trainers.losses.mlm import mask_tokens, masked_lm_loss, prediction_head  # noqa: E402
from trainers.losses.nt_xent import nt_xent  # noqa: E402
from trainers.losses.simsiam import SimSiamPredictor, simsiam_loss  # noqa: E402

__all__ = [
    "CONTRASTIVE_LOSSES",
    "BregmanHead",
    "ContrastiveLoss",
    "SimSiamPredictor",
    "active_subnetworks",
    "bregman_divergence",
    "bregman_loss",
    "deca_nt_xent",
    "info_nce",
    "mask_tokens",
    "masked_lm_loss",
    "nt_xent",
    "prediction_head",
    "simsiam_loss",
]
