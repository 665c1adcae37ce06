"""DocSplit / SimDE positive pairs: a document's sentences split into two disjoint views.

Each sentence goes to view A with probability ``p`` (``split_probability``), else to view B;
both views keep the document's sentence order, share no sentence, and together use every
sentence exactly once. A draw that leaves one view empty is redrawn, so both views are
non-empty. Documents with a single sentence fall back to a word-span split: the sentence is cut
at a uniformly drawn word boundary into a prefix (view A) and a suffix (view B). A document of
fewer than two words gives no pair (``None``).

With ``elongate`` set, view A is then elongated as in LA(SER)^3 (``trainers.pairs.laser``): copied
``m`` times, ``m`` drawn from the elongation range and capped to the token budget.

DocSplit: "DocSplit: Simple Contrastive Pretraining for Large Document Embeddings" (Neumann et
al.); SimDE, the same sentence-split views with InfoNCE + MLM.
"""

from __future__ import annotations

import random

from trainers.pairs import PairContext, register
from trainers.pairs.laser import draw_m, elongate


def split_views(sentences: list[str], p: float, rng: random.Random) -> tuple[list[str], list[str]] | None:
    """The two views as sentence lists (see module docstring for the rules)."""
    if len(sentences) >= 2:
        while True:
            to_a = [rng.random() < p for _ in sentences]
            if any(to_a) and not all(to_a):
                break
        view_a = [s for s, a in zip(sentences, to_a) if a]
        view_b = [s for s, a in zip(sentences, to_a) if not a]
        return view_a, view_b
    words = sentences[0].split() if sentences else []
    if len(words) < 2:
        return None
    cut = rng.randint(1, len(words) - 1)
    return [" ".join(words[:cut])], [" ".join(words[cut:])]


@register("docsplit")
def docsplit_pairs(context: PairContext):
    hp = context.hp
    low, high = hp.elongation_range

    def build(sentences: list[str], rng: random.Random) -> tuple[str, str] | None:
        views = split_views(sentences, hp.split_probability, rng)
        if views is None:
            return None
        view_a, view_b = " ".join(views[0]), " ".join(views[1])
        if hp.elongate:
            view_a = elongate(view_a, draw_m(low, high, context.count_tokens(view_a), context.max_length, rng))
        return view_a, view_b

    return build
