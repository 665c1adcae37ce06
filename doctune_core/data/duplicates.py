"""Near-duplicate texts: the rule that keeps a locked test part apart from what is trained on or
chosen by.

Two texts are near duplicates when the Jaccard similarity of their 5-word shingles (runs of five
consecutive lower-cased words) is at least 0.5; an exact duplicate has 1. The similarity is computed
exactly, through an index of the shingles, not estimated (MinHash would estimate the same quantity).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

SHINGLE_WORDS = 5
NEAR = 0.5  # Jaccard similarity of shingle sets at or above which two texts are near duplicates
_WORD = re.compile(r"\w+")


def shingles(text: str) -> set[str]:
    """The text's runs of ``SHINGLE_WORDS`` lower-cased words (a shorter text: its words as one)."""
    words = _WORD.findall(text.lower())
    return {" ".join(words[i : i + SHINGLE_WORDS]) for i in range(max(1, len(words) - SHINGLE_WORDS + 1))}


def similarity(a: set[str], b: set[str]) -> float:
    """The Jaccard similarity of two texts' ``shingles``."""
    return len(a & b) / len(a | b) if a or b else 1.0


def near_duplicated(texts: Sequence[str], against: Sequence[str], threshold: float = NEAR) -> list[bool]:
    """For each of ``texts``: whether some text of ``against`` is its near duplicate (Jaccard of
    shingles at least ``threshold``). Only ``texts``' shingles are indexed; ``against`` streams past."""
    index: dict[str, list[int]] = {}
    sizes = []
    for i, text in enumerate(texts):
        own = shingles(text)
        sizes.append(len(own))
        for shingle in own:
            index.setdefault(shingle, []).append(i)
    found = [False] * len(texts)
    for text in against:
        own = shingles(text)
        shared = Counter(i for shingle in own for i in index.get(shingle, ()))
        for i, n in shared.items():
            found[i] = found[i] or n / (sizes[i] + len(own) - n) >= threshold
    return found
