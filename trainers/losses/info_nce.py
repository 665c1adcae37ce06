"""InfoNCE over in-batch negatives (the SimCSE form).

Inputs: ``anchors`` and ``positives``, float tensors of shape ``(N, d)``; row ``i`` of each is a
positive pair and every other row of ``positives`` is a negative for ``anchors[i]``. Under data
parallelism, pass the embeddings gathered from all ranks (``trainers.distributed.gather``), so
N is the global batch.

    s_ij = cos(anchors_i, positives_j) / tau
    L_a->b = -1/N sum_i log( exp(s_ii) / sum_j exp(s_ij) )

``symmetric=True`` returns ``(L_a->b + L_b->a) / 2``, where ``L_b->a`` uses the transposed
similarity matrix. Returns a scalar tensor.

Paper: Gao et al., "SimCSE: Simple Contrastive Learning of Sentence Embeddings" (EMNLP 2021),
Eq. 1 (tau = 0.05 there). DocSplit/SimDE use it on sentence-split views; LA(SER)^3 on
elongated views. Related: NT-Xent (SimCLR) also counts same-view negatives.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from doctune_core.fields import constraint
from trainers.distributed import gather, world_size
from trainers.losses.base import CONTRASTIVE_LOSSES, ContrastiveLoss, TemperatureSettings
from trainers.losses.precision import at_least_fp32


def info_nce(
    anchors: torch.Tensor, positives: torch.Tensor, temperature: float, symmetric: bool = False
) -> torch.Tensor:
    if anchors.shape != positives.shape or anchors.dim() != 2:
        shapes = f"{tuple(anchors.shape)} and {tuple(positives.shape)}"
        raise ValueError(f"expected two (N, d) tensors of equal shape, got {shapes}")
    scores = F.normalize(at_least_fp32(anchors), dim=-1) @ F.normalize(at_least_fp32(positives), dim=-1).T / temperature
    labels = torch.arange(scores.shape[0], device=scores.device)
    loss = F.cross_entropy(scores, labels)
    if symmetric:
        loss = (loss + F.cross_entropy(scores.T, labels)) / 2
    return loss


@dataclass(frozen=True)
class InfoNCESettings(TemperatureSettings):
    symmetric: bool = field(default=True, metadata=constraint("InfoNCE in both directions (a->b and b->a)"))


@CONTRASTIVE_LOSSES.register("infonce", default=True)  # a recipe's, unless it names its own
class InfoNCE(ContrastiveLoss):
    """The SimCSE form over every rank's pairs."""

    settings = InfoNCESettings

    def __call__(
        self, settings: InfoNCESettings, a: torch.Tensor, b: torch.Tensor, head_outputs: torch.Tensor | None
    ) -> tuple[torch.Tensor, int]:
        return info_nce(gather(a), gather(b), settings.temperature, settings.symmetric), world_size()
