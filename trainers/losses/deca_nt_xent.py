"""DECA's contrastive loss (Eq. 4): from each document to the augmented copies, the positive left
out of the denominator.

Inputs: ``documents`` and ``augmented``, float tensors of shape ``(N, d)``; row ``i`` of
``augmented`` is the augmented copy of document ``i`` (DECA's h_i and h~_i). Under data
parallelism, pass the embeddings gathered from all ranks, so N is the global batch. Needs N >= 2.

    c_ik = cos(h_i, h~_k) / tau
    l_i  = -log( exp(c_ii) / sum_{k != i} exp(c_ik) )  =  -c_ii + log sum_{k != i} exp(c_ik)
    L    = 1/N sum_i l_i

"The contrastive loss aims to identify h~_i out of the augmented documents in the batch for an
input document D_i": one direction (documents to copies, not back), and the N - 1 negatives are
the other documents' copies only. SimCLR's 2N form (``nt_xent``) differs on both counts: every
row of both views is an anchor, each with 2N - 2 negatives from both views, and the positive is
in its denominator. With the positive left out, l_i can be negative (down to -2 / tau +
log(N - 1)); with a single pair the denominator is empty, so fewer than two pairs are refused.
The paper sums l_i over the batch (Eq. 6); doctune takes the mean, as its other contrastive terms
do, so that the term's scale (against gradient clipping and the MLM and Bregman terms) does not
grow with the batch size.

Luo, Cheng et al., "Unsupervised Document Embedding via Contrastive Augmentation", §3.2, Eq. 4.
Related: ``nt_xent`` (SimCLR, Chen et al. 2020, Eq. 1), ``info_nce`` (the positive in the
denominator, one direction).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from trainers.distributed import gather, world_size
from trainers.losses.base import CONTRASTIVE_LOSSES, ContrastiveLoss, TemperatureSettings
from trainers.losses.precision import at_least_fp32


def deca_nt_xent(documents: torch.Tensor, augmented: torch.Tensor, temperature: float) -> torch.Tensor:
    if documents.shape != augmented.shape or documents.dim() != 2:
        shapes = f"{tuple(documents.shape)} and {tuple(augmented.shape)}"
        raise ValueError(f"expected two (N, d) tensors of equal shape, got {shapes}")
    n = documents.shape[0]
    if n < 2:
        raise ValueError(f"DECA's loss needs at least two pairs (its negatives are the other pairs), got {n}")
    scores = F.normalize(at_least_fp32(documents), dim=-1) @ F.normalize(at_least_fp32(augmented), dim=-1).T
    scores = scores / temperature
    negatives = scores.masked_fill(torch.eye(n, dtype=torch.bool, device=scores.device), float("-inf"))
    return (torch.logsumexp(negatives, dim=1) - scores.diagonal()).mean()


@CONTRASTIVE_LOSSES.register("deca_ntxent")
class DECANTXent(ContrastiveLoss):
    """DECA's Eq. 4 over every rank's pairs; view A is the document, view B its augmented copy."""

    min_pairs = 2
    settings = TemperatureSettings

    def __call__(
        self, settings: TemperatureSettings, a: torch.Tensor, b: torch.Tensor, head_outputs: torch.Tensor | None
    ) -> tuple[torch.Tensor, int]:
        return deca_nt_xent(gather(a), gather(b), settings.temperature), world_size()
