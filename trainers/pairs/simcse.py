"""SimCSE positive pairs: the same text twice; dropout in the encoder is the only noise.

Gao et al., "SimCSE: Simple Contrastive Learning of Sentence Embeddings" (EMNLP 2021), Sec. 3.
The self-contrastive Bregman method builds on these pairs too (Rezaei et al. 2021; Saggau et al. 2023).
"""

from __future__ import annotations

import random
from typing import ClassVar

from trainers.pairs.base import RECIPES, PairBuilder, PairContext, Recipe


@RECIPES.register("simcse")
class SimCSE(Recipe):
    # the same text twice: the encoder's dropout makes the two views differ
    views: ClassVar[dict[str, dict]] = {"dropout": {}}

    def pairs(self, context: PairContext) -> PairBuilder:
        return _same_text


def _same_text(sentences: list[str], rng: random.Random) -> tuple[str, str] | None:
    text = " ".join(sentences)
    return (text, text) if text.strip() else None
