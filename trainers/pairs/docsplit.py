"""DocSplit / SimDE positive pairs: a document's sentences split into two disjoint views.

Each sentence goes to view A with probability ``p`` (``split_probability``), else to view B
(DocSplit §2.2; SimDE §2.2 with p = 0.5); both views keep the document's sentence order, share no
sentence, and together use every sentence exactly once, and neither is empty. Independent coin
flips redrawn until both views are non-empty would bias short documents towards an even split
(3 sentences at p = 0.3: 43% of sentences to view A), so the number of view-A sentences ``k`` is
drawn instead from the binomial over 1..n-1 tilted so that its mean is ``n * p``, and a uniform
subset of that size goes to A: every sentence then goes to A with probability exactly ``p``
(``split_counts``). Where no split with both views non-empty can give ``p`` (a sentence's chance
lies in [1/n, 1 - 1/n]: a 2-sentence document always splits one and one, a 3-sentence one cannot
give 0.3), the nearest achievable probability is used. Documents with a single sentence fall back
to a word-span split: the sentence is cut at a uniformly drawn word boundary into a prefix (view
A) and a suffix (view B). A document of fewer than two words gives no pair (``None``).

With ``elongate`` set, view A is then elongated as in LA(SER)^3 (``trainers.pairs.laser``): copied
``m`` times, ``m`` drawn from the elongation range and capped to the token budget.

DocSplit: "DocSplit: Simple Contrastive Pretraining for Large Document Embeddings" (Wang &
Izbicki), §2.2; SimDE: "SimDE: Simple Contrastive Learning for Document Embeddings", §2.2, the same
sentence-split views, with InfoNCE (§2.1) + MLM (§3.1).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from functools import lru_cache
from typing import ClassVar

from doctune_core.data.corpus import CorpusStats
from doctune_core.fields import constraint
from trainers.pairs.base import RECIPES, PairBuilder, PairContext, Recipe
from trainers.pairs.laser import ElongationSettings, draw_m, elongate


@lru_cache(maxsize=4096)
def split_counts(n: int, p: float) -> tuple[list[int], list[float]]:
    """The sizes ``k`` = 1..n-1 view A may get from ``n`` sentences, and their probabilities: the
    binomial(n, theta) restricted to 1..n-1, with theta chosen so that the mean is ``n * p``
    (clamped to [1, n - 1]). With a uniform subset of size ``k`` for view A, each sentence goes
    to A with probability mean / n."""
    sizes = list(range(1, n))
    target = min(max(n * p, 1.0), n - 1.0)

    def weights(theta: float) -> list[float]:
        logs = [math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1) for k in sizes]
        logs = [w + k * math.log(theta) + (n - k) * math.log1p(-theta) for w, k in zip(logs, sizes)]
        top = max(logs)
        raw = [math.exp(w - top) for w in logs]
        return [w / sum(raw) for w in raw]

    def mean(theta: float) -> float:
        return sum(k * w for k, w in zip(sizes, weights(theta)))

    if target <= 1.0 or target >= n - 1.0:  # the edge of what non-empty views allow: one size only
        return [round(target)], [1.0]
    low, high = 1e-12, 1 - 1e-12  # the mean grows with theta: bisect
    for _ in range(100):
        middle = (low + high) / 2
        low, high = (middle, high) if mean(middle) < target else (low, middle)
    return sizes, weights((low + high) / 2)


def split_views(sentences: list[str], p: float, rng: random.Random) -> tuple[list[str], list[str]] | None:
    """The two views as sentence lists (see module docstring for the rules)."""
    n = len(sentences)
    if n >= 2:
        sizes, probabilities = split_counts(n, p)
        to_a = set(rng.sample(range(n), rng.choices(sizes, probabilities)[0]))
        view_a = [s for i, s in enumerate(sentences) if i in to_a]
        view_b = [s for i, s in enumerate(sentences) if i not in to_a]
        return view_a, view_b
    words = sentences[0].split() if sentences else []
    if len(words) < 2:
        return None
    cut = rng.randint(1, len(words) - 1)
    return [" ".join(words[:cut])], [" ".join(words[cut:])]


@dataclass(frozen=True)
class DocSplitSettings(ElongationSettings):
    split_probability: float = field(
        default=0.5,
        metadata=constraint(
            "docsplit: probability that a sentence goes to view A", 0.0, 1.0, low_open=True, high_open=True
        ),
    )
    elongate: bool = field(
        default=False, metadata=constraint("docsplit: also elongate view A (copy-and-concatenate, LA(SER)^3)")
    )


@RECIPES.register("docsplit", default=True)  # what a spec naming no recipe trains
class DocSplit(Recipe):
    settings = DocSplitSettings
    # DocSplit / SimDE: the sentences split between the views; the split with view A elongated is doctune's own
    views: ClassVar[dict[str, dict]] = {"split": {"elongate": False}, "split+elongation": {"elongate": True}}

    def corpus_problem(self, stats: CorpusStats) -> str | None:
        if stats.single_sentence_documents == stats.documents:
            return (
                f"all {stats.documents} documents are a single sentence, and docsplit splits a document's "
                "sentences into two views; use documents of several sentences, or another recipe"
            )
        return None

    def pairs(self, context: PairContext[DocSplitSettings]) -> PairBuilder:
        own = context.settings
        low, high = own.elongation_range

        def build(sentences: list[str], rng: random.Random) -> tuple[str, str] | None:
            views = split_views(sentences, own.split_probability, rng)
            if views is None:
                return None
            view_a, view_b = " ".join(views[0]), " ".join(views[1])
            if own.elongate:
                view_a = elongate(view_a, draw_m(low, high, context.count_tokens(view_a), context.max_length, rng))
            return view_a, view_b

        return build
