"""Independent crops: two random spans of one window of a document are a positive pair.

A window of the document that fits the view's token budget is drawn at a uniform position (the
whole document where it fits); each view is a span of it drawn independently of the other, its
length a uniform share of the window between ``crop_min`` and ``crop_max``, its start uniform where
it fits. The two spans may overlap, or not: what they share is their document, so the pair teaches
the encoder what is constant across a document's parts, not a copy. Spans are cut at word
boundaries, their lengths counted in words (the window's in the trial's tokens). A document of fewer
than ``MIN_WORDS`` words gives no pair.

Izacard et al., "Unsupervised Dense Information Retrieval with Contrastive Learning" (Contriever,
arXiv 2112.09118), Sec. 3.1: independent cropping, which outperformed the inverse cloze task there;
the share range 0.1-0.5 is the probe's that measured its step-0 signal (bench/RESULTS.md, "Views
with a gradient").
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import ClassVar

from doctune_core.fields import constraint
from trainers.pairs.base import RECIPES, PairBuilder, PairContext, Recipe
from trainers.pairs.laser import SPECIAL_TOKENS

MIN_WORDS = 4  # the fewest words two spans of at least one word each can be drawn from, with room to differ


@dataclass(frozen=True)
class CropSettings:
    crop_min: float = field(
        default=0.1,
        metadata=constraint("crops: the smallest share of the window a crop takes", 0.0, 1.0, low_open=True),
    )
    crop_max: float = field(
        default=0.5,
        metadata=constraint("crops: the largest share of the window a crop takes", 0.0, 1.0, low_open=True),
    )

    @property
    def crop_range(self) -> tuple[float, float]:
        """(smallest, largest share); the two bounds may be searched independently, so they are ordered here."""
        return min(self.crop_min, self.crop_max), max(self.crop_min, self.crop_max)


def window(words: list[str], budget: int, count_tokens, rng: random.Random) -> list[str]:
    """A run of ``words`` at a uniform position whose text fits ``budget`` tokens (all of them where
    they fit): its length estimated from the document's tokens per word, then shortened until it fits."""
    text_tokens = count_tokens(" ".join(words))
    if text_tokens <= budget:
        return words
    size = max(1, int(len(words) * budget / text_tokens))
    start = rng.randint(0, len(words) - size)
    chosen = words[start : start + size]
    while len(chosen) > 1 and count_tokens(" ".join(chosen)) > budget:
        chosen = chosen[: max(1, int(len(chosen) * 0.9))]
    return chosen


def crop(words: list[str], low: float, high: float, rng: random.Random) -> str:
    """A span of ``words``: its length a uniform share in [low, high] of them (at least one word), its
    start uniform where it fits."""
    length = max(1, round(rng.uniform(low, high) * len(words)))
    start = rng.randint(0, len(words) - length)
    return " ".join(words[start : start + length])


@RECIPES.register("crops")
class Crops(Recipe):
    settings = CropSettings
    views: ClassVar[dict[str, dict]] = {"crops": {}}  # Contriever's independent cropping

    def pairs(self, context: PairContext[CropSettings]) -> PairBuilder:
        low, high = context.settings.crop_range
        budget = context.max_length - SPECIAL_TOKENS

        def build(sentences: list[str], rng: random.Random) -> tuple[str, str] | None:
            words = " ".join(sentences).split()
            if len(words) < MIN_WORDS:
                return None
            chunk = window(words, budget, context.count_tokens, rng)
            return crop(chunk, low, high, rng), crop(chunk, low, high, rng)

        return build
