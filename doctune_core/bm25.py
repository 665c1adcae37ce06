"""BM25 as doctune ranks by words: ``bm25s`` (Lucene's variant), k1 1.5, b 0.75, English stop words
removed, no stemming. The retrieval tasks' reference row (``evaluators.references``) and the hard
negatives mined from a pretraining corpus (``doctune_core.data.neighbours``) both rank with it."""

from __future__ import annotations

from collections.abc import Sequence

PARAMETERS = {"k1": 1.5, "b": 0.75}


def bm25_tokens(texts: Sequence[str]) -> list[list[str]]:
    import bm25s

    return bm25s.tokenize(list(texts), stopwords="en", return_ids=False, show_progress=False)


def bm25_index(texts: Sequence[str]):
    """A ``bm25s.BM25`` index of ``texts`` (retrieve with ``bm25_tokens`` of the queries)."""
    import bm25s

    index = bm25s.BM25(**PARAMETERS)
    index.index(bm25_tokens(texts), show_progress=False)
    return index
