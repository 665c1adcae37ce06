"""LA(SER)^3 positive pairs: copy-and-concatenate elongation must not change meaning.

- ``self`` reference: an anchor sentence vs. the same sentence repeated ``m`` times.
- ``intra`` reference: the anchor repeated ``m`` times vs. the rest of its document.

The anchor is the first sentence (the paper's main setting, §4; a random anchor, kept selectable,
made self-reference worse than SimCSE in its ablation, §5.1 Table 3) or a uniformly drawn one
(``anchor``). ``m`` is drawn per example uniformly from the elongation range *already capped* so
the elongated text fits, ``[min(m_min, cap), min(m_max, cap)]`` with ``cap = (max_length - 2) //
tokens(anchor)``: §4, "if a sentence has 10 tokens excluding [cls], we sample a random integer
from [1, 25] ... for a 50-token sentence, we sample from [1, 5]" (max length 256). Drawing from
``[m_min, m_max]`` and capping afterwards would pile the mass on the cap (72% of it for a 30-token
sentence with the range [1, 25]). Documents of one sentence fall back to ``self`` reference.

Xiao et al., "Length is a Curse and a Blessing for Document-level Semantics" (EMNLP 2023):
LA(SER)^3, length-agnostic self-reference.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import ClassVar, Literal

from doctune_core.fields import constraint
from trainers.pairs.base import RECIPES, PairBuilder, PairContext, Recipe

SPECIAL_TOKENS = 2  # [CLS] and [SEP] share the token budget


def elongation_cap(tokens: int, max_length: int) -> int:
    return max(1, (max_length - SPECIAL_TOKENS) // max(1, tokens))


def elongate(text: str, m: int) -> str:
    return " ".join([text] * m)


def draw_m(low: int, high: int, tokens: int, max_length: int, rng: random.Random) -> int:
    """Uniform over [low, high] capped so m copies of ``tokens`` fit in ``max_length`` (§4)."""
    cap = elongation_cap(tokens, max_length)
    return rng.randint(min(low, cap), min(high, cap))


@dataclass(frozen=True)
class ElongationSettings:
    """The copy count's range (§4), shared with DocSplit's elongated view A."""

    elongation_min: int = field(default=1, metadata=constraint("laser / elongation: smallest copy count m", 1, 512))
    elongation_max: int = field(
        default=256,
        metadata=constraint(
            "laser / elongation: largest copy count m (the token budget caps it too; from max_length - 2 up, "
            "only the budget bounds m, LA(SER)^3's rule, Sec. 4: the default 256 does so up to 258 tokens)",
            1,
            512,
        ),
    )

    @property
    def elongation_range(self) -> tuple[int, int]:
        """(m_min, m_max); the two bounds may be searched independently, so they are ordered here."""
        return min(self.elongation_min, self.elongation_max), max(self.elongation_min, self.elongation_max)


@dataclass(frozen=True)
class LaserSettings(ElongationSettings):
    laser_mode: Literal["self", "intra"] = field(
        default="self", metadata=constraint("laser: self (sentence vs. its m-fold copy) or intra (vs. the rest)")
    )
    anchor: Literal["first", "random"] = field(
        default="first",
        metadata=constraint("laser: which sentence anchors the pair (first: the paper's main setting, Sec. 4)"),
    )


@RECIPES.register("laser")
class LaSER(Recipe):
    settings = LaserSettings
    views: ClassVar[dict[str, dict]] = {"elongation": {}}  # copy-and-concatenate

    def pairs(self, context: PairContext[LaserSettings]) -> PairBuilder:
        own = context.settings
        low, high = own.elongation_range

        def build(sentences: list[str], rng: random.Random) -> tuple[str, str] | None:
            sentences = [s for s in sentences if s.strip()]
            if not sentences:
                return None
            index = 0 if own.anchor == "first" else rng.randrange(len(sentences))
            anchor = sentences[index]
            m = draw_m(low, high, context.count_tokens(anchor), context.max_length, rng)
            rest = sentences[:index] + sentences[index + 1 :]
            if own.laser_mode == "intra" and rest:
                return elongate(anchor, m), " ".join(rest)
            return anchor, elongate(anchor, m)

        return build
