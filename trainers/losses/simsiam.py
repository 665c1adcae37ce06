"""SimSiam: a predictor MLP and a stop-gradient instead of negatives.

``SimSiamPredictor(dim)``: ``h = Linear(dim, 64) -> BatchNorm1d -> ReLU -> Linear(64, dim)``, the
predictor DECA uses ("a two layer MLPs with 64 hidden. Batch Normalization are adopted", App.
A.3.2), with SimSiam's bottleneck shape (its own is 2048 -> 512 -> 2048).

``simsiam_loss(p_a, p_b, z_a, z_b)``: all ``(N, d)``; ``p = h(z)`` are the predictions, ``z`` the
pooled embeddings of the two views.

    D(p, z) = -mean_i cos(p_i, stopgrad(z_i))
    L = D(p_a, z_b) / 2 + D(p_b, z_a) / 2

No negatives, so nothing is gathered across ranks; DDP's gradient average over per-rank means is
the global mean. Chen & He, "Exploring Simple Siamese Representation Learning" (CVPR 2021),
Eq. 1-2 and Algorithm 1; DECA uses it beside its Eq. 4 (§3.2, Eq. 5). DECA's Eq. 5 prints the
stop-gradient on the predictor's outputs, which would leave the predictor without a gradient;
doctune follows SimSiam, where it is on the encoder's side. Needs at least two examples per
worker (batch norm).
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from trainers.config import NoSettings
from trainers.losses.base import CONTRASTIVE_LOSSES, ContrastiveLoss
from trainers.losses.precision import at_least_fp32

PREDICTOR_HIDDEN = 64  # DECA App. A.3.2: "a two layer MLPs with 64 hidden"


class SimSiamPredictor(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        hidden = PREDICTOR_HIDDEN
        self.net = nn.Sequential(nn.Linear(dim, hidden), nn.BatchNorm1d(hidden), nn.ReLU(), nn.Linear(hidden, dim))

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.net(z)


def negative_cosine(p: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    return -F.cosine_similarity(at_least_fp32(p), at_least_fp32(z.detach()), dim=-1).mean()


def simsiam_loss(p_a: torch.Tensor, p_b: torch.Tensor, z_a: torch.Tensor, z_b: torch.Tensor) -> torch.Tensor:
    return negative_cosine(p_a, z_b) / 2 + negative_cosine(p_b, z_a) / 2


@CONTRASTIVE_LOSSES.register("simsiam")
class SimSiam(ContrastiveLoss):
    """The predictor is the head; per-rank means, so nothing is gathered (DDP's average of them is
    the global mean)."""

    min_pairs_per_worker = 2  # the predictor's batch norm

    def head(self, dim: int) -> nn.Module:
        return SimSiamPredictor(dim)

    def __call__(
        self, settings: NoSettings, a: torch.Tensor, b: torch.Tensor, head_outputs: torch.Tensor | None
    ) -> tuple[torch.Tensor, int]:
        n = a.shape[0]
        return simsiam_loss(head_outputs[:n], head_outputs[n:], a, b), 1
