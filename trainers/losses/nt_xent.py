"""NT-Xent, the normalised temperature-scaled cross-entropy of SimCLR (the 2N form).

Inputs: ``view_a`` and ``view_b``, float tensors of shape ``(N, d)``; row ``i`` of each is a
positive pair. All 2N embeddings are pooled, so each one has 2N - 2 negatives: the other pairs'
rows of *both* views (InfoNCE only counts the other view). Under data parallelism, pass the
embeddings gathered from all ranks.

    z = normalise([view_a; view_b])            (2N, d)
    s_ij = z_i . z_j / tau,  s_ii = -inf
    L = -1/2N sum_i log( exp(s_{i,pos(i)}) / sum_{j != i} exp(s_ij) ),  pos(i) = i +- N

Chen et al., "A Simple Framework for Contrastive Learning of Visual Representations" (ICML
2020), Eq. 1. Related: ``info_nce`` (SimCSE form); ``deca_nt_xent`` (DECA's Eq. 4, which names
NT-Xent but prints one direction with the positive out of the denominator).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from trainers.distributed import gather, world_size
from trainers.losses.base import CONTRASTIVE_LOSSES, ContrastiveLoss, TemperatureSettings
from trainers.losses.precision import at_least_fp32


def similarity_logits_2n(scores: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Mask the diagonal of a (2N, 2N) score matrix; return it and each row's positive index."""
    n2 = scores.shape[0]
    n = n2 // 2
    scores = scores.masked_fill(torch.eye(n2, dtype=torch.bool, device=scores.device), float("-inf"))
    positives = torch.cat([torch.arange(n, n2), torch.arange(0, n)]).to(scores.device)
    return scores, positives


def nt_xent(view_a: torch.Tensor, view_b: torch.Tensor, temperature: float) -> torch.Tensor:
    if view_a.shape != view_b.shape or view_a.dim() != 2:
        raise ValueError(
            f"expected two (N, d) tensors of equal shape, got {tuple(view_a.shape)}, {tuple(view_b.shape)}"
        )
    z = F.normalize(at_least_fp32(torch.cat([view_a, view_b])), dim=-1)
    scores, positives = similarity_logits_2n(z @ z.T / temperature)
    return F.cross_entropy(scores, positives)


@CONTRASTIVE_LOSSES.register("ntxent")
class NTXent(ContrastiveLoss):
    """SimCLR's loss over every rank's pairs."""

    settings = TemperatureSettings

    def __call__(
        self, settings: TemperatureSettings, a: torch.Tensor, b: torch.Tensor, head_outputs: torch.Tensor | None
    ) -> tuple[torch.Tensor, int]:
        return nt_xent(gather(a), gather(b), settings.temperature), world_size()
