"""The anchor term: keep the trained encoder's embeddings of short pretraining texts where the
frozen start put them.

``anchor_loss(embeddings, targets)``: ``embeddings`` (M, d), the trained encoder's pooled
embeddings of M short texts in this step; ``targets`` (M, d), the start's embeddings of the same
texts (``trainers.anchor_targets``: computed once, before any trial, and cached). With unit vectors

    L_anchor = 1/M sum_i || e_i / |e_i| - t_i / |t_i| ||^2  =  1/M sum_i 2 (1 - cos(e_i, t_i))

the mean squared error of Reimers & Gurevych's distillation ("Making Monolingual Sentence Embeddings
Multilingual using Knowledge Distillation", EMNLP 2020, Sec. 2: the student's embedding of a text
regressed onto a frozen teacher's) on normalised embeddings, so that the term reads directions, as
every task scores by cosine, and its scale does not depend on the encoder's norms. The training
total adds ``anchor_weight * L_anchor``; 0, the default, leaves the term off. The texts are the
first sentences of pretraining documents, at most ``ANCHOR_WORDS`` words (``trainers.anchor_targets``):
never a validation or test text.

The base all-MiniLM-L6-v2 was itself trained on a billion pairs; a contrastive signal from one
corpus pulls it away from what those taught (fine-tuning it further has lowered it: arXiv
2506.18535), and the anchor keeps what a short text's embedding was while the long reading trains.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from doctune_core.fields import constraint
from trainers.losses.precision import at_least_fp32


@dataclass(frozen=True)
class AnchorSettings:
    anchor_weight: float = field(
        default=0.0,
        metadata=constraint(
            "weight of the anchor term: 2 (1 - cos) between the trained encoder's and the frozen start's embeddings "
            "of short pretraining texts (trainers.losses.anchor); 0: no anchor",
            0.0,
            100.0,
            perturbable=True,
        ),
    )
    anchor_texts: int = field(
        default=8,
        metadata=constraint("anchor: short pretraining texts a worker embeds each step for the anchor term", 1, 4096),
    )


def anchor_loss(embeddings: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    if embeddings.shape != targets.shape or embeddings.dim() != 2:
        raise ValueError(
            f"expected two (M, d) tensors of equal shape, got {tuple(embeddings.shape)} and {tuple(targets.shape)}"
        )
    trained = F.normalize(at_least_fp32(embeddings), dim=-1)
    start = F.normalize(at_least_fp32(targets), dim=-1)
    return (trained - start).pow(2).sum(-1).mean()
