"""Span to document: a span taken out of a long document is one view, the document without it the other.

View A is a run of words at a uniform position past the document's first ``span_after`` tokens, its
length uniform between ``span_min_tokens`` and ``span_max_tokens``; view B is the document with the
span taken out, read as long as the trial reads (its ``max_length``). The pair asks the encoder to
place a passage where the rest of its document is, reading past what a short encoder sees: with
``span_after`` at or above the trial's length, view B's tokens never hold the span. Token counts are
estimated from the document's own tokens per word. A document that is not longer than ``span_after``
plus ``span_min_tokens`` gives no pair.

The views come from the training stream, which holds pretraining documents only (the held-out
articles the news tasks read are never in it: ``doctune_core.data.news``); the span is drawn at
random, by no rule on its words, and no question template is written into it, so the pair is none of
the evaluation tasks' (neither the passage task's choice of the passage least like the opening, nor
the needle and passkey tasks' planted facts).

The inverse cloze task (Lee et al., "Latent Retrieval for Weakly Supervised Open Domain Question
Answering", ACL 2019, Sec. 5) pairs a sentence with its context, the sentence removed; here the
context is the whole document and the span lies beyond a short encoder's window. Its step-0 signal:
bench/RESULTS.md, "Views with a gradient".
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import ClassVar

from doctune_core.fields import constraint
from trainers.pairs.base import RECIPES, PairBuilder, PairContext, Recipe


@dataclass(frozen=True)
class SpanSettings:
    span_after: int = field(
        default=512,
        metadata=constraint(
            "span: tokens of the document before the span (it is taken past them: a document not longer than "
            "this plus span_min_tokens gives no pair)",
            0,
        ),
    )
    span_min_tokens: int = field(default=32, metadata=constraint("span: the span's fewest tokens", 1))
    span_max_tokens: int = field(default=96, metadata=constraint("span: the span's most tokens", 1))

    @property
    def span_range(self) -> tuple[int, int]:
        """(fewest, most tokens); the two bounds may be searched independently, so they are ordered here."""
        return min(self.span_min_tokens, self.span_max_tokens), max(self.span_min_tokens, self.span_max_tokens)


def take_span(
    words: list[str], after: int, low: int, high: int, tokens_per_word: float, rng: random.Random
) -> tuple[str, str] | None:
    """(the span, the document without it) from ``words``; None where the document is too short."""
    skip = math.ceil(after / tokens_per_word)
    fewest, most = max(1, round(low / tokens_per_word)), max(1, round(high / tokens_per_word))
    if len(words) < skip + fewest + 1:  # the span, and at least one word of the document besides it
        return None
    length = rng.randint(fewest, max(fewest, min(most, len(words) - skip - 1)))
    start = rng.randint(skip, len(words) - length)
    return " ".join(words[start : start + length]), " ".join(words[:start] + words[start + length :])


@RECIPES.register("span")
class SpanToDocument(Recipe):
    settings = SpanSettings
    views: ClassVar[dict[str, dict]] = {"span": {}}  # a span of a long document against the rest of it

    def pairs(self, context: PairContext[SpanSettings]) -> PairBuilder:
        own = context.settings
        low, high = own.span_range

        def build(sentences: list[str], rng: random.Random) -> tuple[str, str] | None:
            words = " ".join(sentences).split()
            if len(words) < 2:
                return None
            tokens_per_word = max(context.count_tokens(" ".join(words)), 1) / len(words)
            return take_span(words, own.span_after, low, high, tokens_per_word, rng)

        return build
