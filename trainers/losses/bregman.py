"""Self-contrastive Bregman divergence: K sub-networks define a convex function whose Bregman
divergence measures dissimilarity.

``BregmanHead(dim, k)``: K sub-networks ``f_k`` on the L2-normalised embedding, each ``Linear(dim,
HIDDEN) -> BatchNorm -> ReLU -> Linear(HIDDEN, 1) -> BatchNorm``: "two linear layers with one
activation layer and two batch normalization layers" (Saggau et al., App. D, whose ablation
finds the model worse without the batch normalisation), computed together; output ``(N, K)``.
The batch statistics are each rank's (the head sees both views of the rank's whole batch at
once, also under GradCache).

``bregman_loss(scores_a, scores_b, sigma, temperature)``: the sub-network outputs of the two views,
``(N, K)`` each (gathered across ranks for global negatives). With phi(z) = max_k f_k(z) and
k*(z) = argmax_k f_k(z), the divergence of row i from row j is (Eqs. 3-6)

    D_ij = f_{k*(i)}(z_i) - f_{k*(j)}(z_i)           (>= 0; 0 when both pick the same f_k)
    S_ij = exp(-D_ij / (2 sigma^2))                  (the Gaussian kernel of Rezaei et al.)
    L = NT-Xent over the 2N rows with logits S_ij / temperature (diagonal masked)

With K = 1 every D is 0. ``active_subnetworks`` counts the distinct argmax winners in a batch, so a
collapse onto one sub-network is visible. The training total is Eq. 7, ``L_contrastive + lambda *
L_Bregman`` (``bregman_weight`` is lambda; ``contrastive_weight`` stays 1), plus MLM where asked.
The term is on when ``bregman_k`` (K) is above 0. App. A grid-searches K in {2, 5, 8, 10, 20},
sigma in [1, 3] and lambda in {0.1, 2, 4, 5, 10} and selects K 10, sigma 2, lambda 2, with the
temperature fixed at 0.1 and lr 3e-5: doctune's defaults for sigma, lambda and the Bregman
temperature.
Rezaei et al., "Deep Bregman Divergence for Contrastive Learning of Visual Representations"
(2021); Saggau et al., "Efficient Document Embeddings via Self-Contrastive Bregman Divergence
Learning" (Findings of ACL 2023).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn as nn
import torch.nn.functional as F

from doctune_core.fields import constraint
from trainers.losses.nt_xent import similarity_logits_2n

HIDDEN = 64  # each sub-network's width: App. D does not give it; the vision paper's code uses 64


@dataclass(frozen=True)
class BregmanSettings:
    """The Bregman term's own settings, an add-on to any recipe: App. A's grid selected K 10,
    sigma 2, lambda 2 with tau 0.1; K defaults to 0, the term off."""

    bregman_k: int = field(
        default=0,
        metadata=constraint(
            "Bregman: number of sub-networks K; 0: no Bregman term (the term is an add-on to any recipe; "
            "bregman_k: 10 turns on App. A's selected configuration with the defaults below)",
            0,
            256,
        ),
    )
    bregman_weight: float = field(
        default=2.0,
        metadata=constraint(
            "Bregman lambda (Eq. 7: contrastive + lambda * Bregman; App. A selects 2 of 0.1, 2, 4, 5, 10)",
            0.0,
            100.0,
            low_open=True,
            perturbable=True,
        ),
    )
    bregman_sigma: float = field(
        default=2.0,
        metadata=constraint(
            "Bregman: sigma in exp(-D / 2 sigma^2) (App. A selects 2 of 1 to 3)", 0.0, 100.0, low_open=True
        ),
    )
    bregman_temperature: float = field(
        default=0.1, metadata=constraint("Bregman: NT-Xent temperature (App. A: 0.1)", 0.0, 10.0, low_open=True)
    )


class BregmanHead(nn.Module):
    def __init__(self, dim: int, k: int) -> None:
        super().__init__()
        self.hidden = nn.Linear(dim, k * HIDDEN)
        self.hidden_norm = nn.BatchNorm1d(k * HIDDEN)
        self.out_weight = nn.Parameter(torch.randn(k, HIDDEN) / HIDDEN**0.5)
        self.out_norm = nn.BatchNorm1d(k)  # its shift is the second linear layer's bias
        self.k = k

    def forward(self, embeddings: torch.Tensor) -> torch.Tensor:
        z = F.normalize(embeddings.float(), dim=-1)
        hidden = F.relu(self.hidden_norm(self.hidden(z))).view(z.shape[0], self.k, HIDDEN)
        return self.out_norm(torch.einsum("nkh,kh->nk", hidden, self.out_weight))


def bregman_divergence(scores: torch.Tensor) -> torch.Tensor:
    """(M, K) sub-network outputs -> (M, M) divergences D_ij = max_k F_ik - F_{i, argmax_k F_jk}."""
    winners = scores.argmax(dim=1)  # k*(j)
    return scores.max(dim=1).values.unsqueeze(1) - scores[:, winners]


def bregman_loss(scores_a: torch.Tensor, scores_b: torch.Tensor, sigma: float, temperature: float) -> torch.Tensor:
    divergence = bregman_divergence(torch.cat([scores_a, scores_b]))
    similarity = torch.exp(-divergence / (2 * sigma**2))
    logits, positives = similarity_logits_2n(similarity / temperature)
    return F.cross_entropy(logits, positives)


def active_subnetworks(scores: torch.Tensor) -> int:
    return int(scores.argmax(dim=1).unique().numel())
