"""InfoNCE over in-batch negatives (the SimCSE form).

Inputs: ``anchors`` and ``positives``, float tensors of shape ``(N, d)``; row ``i`` of each is a
positive pair and every other row of ``positives`` is a negative for ``anchors[i]``. Under data
parallelism, pass the embeddings gathered from all ranks (``trainers.distributed.gather``), so
N is the global batch.

    s_ij = cos(anchors_i, positives_j) / tau
    L_a->b = -1/N sum_i log( exp(s_ii) / sum_j exp(s_ij) )

``symmetric=True`` returns ``(L_a->b + L_b->a) / 2``, where ``L_b->a`` uses the transposed
similarity matrix. Returns a scalar tensor.

``negatives`` (``(M, d)``, optional): hard negatives (``trainers.hard_negatives``) that join every
anchor's denominator beside the positives, ``j`` running over the N positives and the M negatives
in ``L_a->b``; ``L_b->a`` ranks the anchors only (a negative is no one's anchor). DPR (Karpukhin et
al., EMNLP 2020, Sec. 3.2) shares its BM25 negatives across the batch the same way.

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
    anchors: torch.Tensor,
    positives: torch.Tensor,
    temperature: float,
    symmetric: bool = False,
    negatives: torch.Tensor | None = None,
) -> torch.Tensor:
    if anchors.shape != positives.shape or anchors.dim() != 2:
        shapes = f"{tuple(anchors.shape)} and {tuple(positives.shape)}"
        raise ValueError(f"expected two (N, d) tensors of equal shape, got {shapes}")
    candidates = positives if negatives is None else torch.cat([positives, negatives])
    scores = (
        F.normalize(at_least_fp32(anchors), dim=-1) @ F.normalize(at_least_fp32(candidates), dim=-1).T / temperature
    )
    n = anchors.shape[0]
    labels = torch.arange(n, device=scores.device)
    loss = F.cross_entropy(scores, labels)
    if symmetric:
        loss = (loss + F.cross_entropy(scores[:, :n].T, labels)) / 2
    return loss


@dataclass(frozen=True)
class InfoNCESettings(TemperatureSettings):
    symmetric: bool = field(default=True, metadata=constraint("InfoNCE in both directions (a->b and b->a)"))


@CONTRASTIVE_LOSSES.register("infonce", default=True)  # a recipe's, unless it names its own
class InfoNCE(ContrastiveLoss):
    """The SimCSE form over every rank's pairs."""

    settings = InfoNCESettings
    takes_hard_negatives = True

    def __call__(
        self,
        settings: InfoNCESettings,
        a: torch.Tensor,
        b: torch.Tensor,
        head_outputs: torch.Tensor | None,
        negatives: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, int]:
        gathered = None if negatives is None else gather(negatives)
        return info_nce(gather(a), gather(b), settings.temperature, settings.symmetric, gathered), world_size()
