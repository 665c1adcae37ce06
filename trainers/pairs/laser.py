"""LA(SER)^3 positive pairs: copy-and-concatenate elongation must not change meaning.

- ``self`` reference: an anchor sentence vs. the same sentence repeated ``m`` times.
- ``intra`` reference: the anchor repeated ``m`` times vs. the rest of its document.

The anchor is the first sentence or a uniformly drawn one (``anchor``). ``m`` is drawn per example
uniformly from the elongation range ``[m_min, m_max]`` and capped so the elongated text fits:
``m * tokens(anchor) <= max_length - 2`` (the paper's example: a 10-token sentence at max length
256 gives m in [1, 25]). Documents of one sentence fall back to ``self`` reference.

Xiao et al., "Length is a Curse and a Blessing for Document-level Semantics" (EMNLP 2023):
LA(SER)^3, length-agnostic self-reference.
"""

from __future__ import annotations

import random

from trainers.pairs import PairContext, register

SPECIAL_TOKENS = 2  # [CLS] and [SEP] share the token budget


def elongation_cap(tokens: int, max_length: int) -> int:
    return max(1, (max_length - SPECIAL_TOKENS) // max(1, tokens))


def elongate(text: str, m: int) -> str:
    return " ".join([text] * m)


def draw_m(low: int, high: int, tokens: int, max_length: int, rng: random.Random) -> int:
    """Uniform in [low, high], then capped so m copies of ``tokens`` fit in ``max_length``."""
    return min(rng.randint(low, high), elongation_cap(tokens, max_length))


@register("laser")
def laser_pairs(context: PairContext):
    hp = context.hp
    low, high = hp.elongation_range

    def build(sentences: list[str], rng: random.Random) -> tuple[str, str] | None:
        sentences = [s for s in sentences if s.strip()]
        if not sentences:
            return None
        index = 0 if hp.anchor == "first" else rng.randrange(len(sentences))
        anchor = sentences[index]
        m = draw_m(low, high, context.count_tokens(anchor), context.max_length, rng)
        rest = sentences[:index] + sentences[index + 1 :]
        if hp.laser_mode == "intra" and rest:
            return elongate(anchor, m), " ".join(rest)
        return anchor, elongate(anchor, m)

    return build
