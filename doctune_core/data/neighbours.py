"""Each pretraining document's BM25 neighbours in its own corpus: the hard negatives a trial may add
to its pairs (``trainers.hard_negatives``, the setting ``hard_negatives``).

Mined once per corpus content (``PreparedCorpus.digest``) into ``<cache>/neighbours/<key>/``:
``neighbours.npy`` holds, for every corpus row (empty rows included, so a row number is the
stream's), the rows of its ``MINED`` best neighbours, best first, -1 where it has fewer;
``manifest.json`` says how they were mined and counts what was left out. A document's query is its
first ``QUERY_WORDS`` words; the index holds every non-empty document's first ``INDEX_WORDS``
words (``doctune_core.bm25``). A document is not its own neighbour, nor is a near duplicate of it
(``doctune_core.data.duplicates``: Jaccard of 5-word shingles at least 0.5): a copy of the text as
its negative would ask the encoder to push two views of one text apart.

DPR (Karpukhin et al., "Dense Passage Retrieval for Open-Domain Question Answering", EMNLP 2020,
Secs. 3.2 and 5.2) mines its negatives with BM25 the same way: texts that match most of the query's
words and are not the positive; one of them a question beside the in-batch negatives improved
retrieval substantially. Every neighbour comes from the pretraining corpus, which holds no
evaluation text (``doctune_core.data.news``).
"""

from __future__ import annotations

import functools
import json
import logging
import shutil
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from doctune_core.bm25 import bm25_index, bm25_tokens
from doctune_core.data.atomic import exclusive_lock
from doctune_core.data.corpus import PreparedCorpus
from doctune_core.data.duplicates import NEAR, shingles, similarity
from doctune_core.data.wheels import cache_dir

log = logging.getLogger(f"doctune.{__name__}")

MINED = 4  # neighbours kept a document: the most hard negatives a pair may take
QUERY_WORDS = 256  # a document's query: its first words (retrieval time grows with the query)
INDEX_WORDS = 2048  # a document as the index holds it
CANDIDATES = 4 * MINED  # BM25 hits read per document, before its self and near duplicates are dropped
QUERY_CHUNK = 1024  # queries retrieved at once (bounds the hits held in memory)
SHINGLED_DOCUMENTS = 1024  # documents whose shingles are held at once (a neighbour is often many documents')
MINING_VERSION = 1  # bump when the mining rule changes
NEIGHBOURS = "neighbours.npy"
MANIFEST = "manifest.json"


def neighbours_dir(corpus: PreparedCorpus) -> Path:
    """Where ``corpus``'s neighbours are kept in this machine's cache (they may not be mined yet)."""
    return cache_dir() / "neighbours" / f"{corpus.digest[:16]}-v{MINING_VERSION}"


@dataclass(frozen=True)
class Neighbours:
    """A corpus's mined neighbours: ``rows[r]`` the neighbours of corpus row ``r``, best first (-1: none)."""

    rows: np.ndarray  # (corpus rows, MINED) int64

    @classmethod
    def load(cls, directory: str | Path) -> Neighbours:
        return cls(np.load(Path(directory) / NEIGHBOURS))

    def of(self, row: int) -> list[int]:
        return [int(r) for r in self.rows[row] if r >= 0]


def ensure_neighbours(corpus: PreparedCorpus) -> Path:
    """``corpus``'s neighbours directory, mined now unless the cache holds it (once, however many
    processes ask at once: a lock, and the directory renamed into place whole)."""
    target = neighbours_dir(corpus)
    if (target / MANIFEST).exists():
        return target
    with exclusive_lock(target):
        if (target / MANIFEST).exists():
            return target
        partial = target.with_name(f"{target.name}.partial-{uuid.uuid4().hex[:8]}")
        try:
            partial.mkdir(parents=True)
            started = time.perf_counter()
            rows, counts = mine(corpus)
            np.save(partial / NEIGHBOURS, rows)
            counts["seconds"] = round(time.perf_counter() - started, 1)
            manifest = {
                "corpus_digest": corpus.digest,
                "mined": MINED,
                "query_words": QUERY_WORDS,
                "index_words": INDEX_WORDS,
                "candidates": CANDIDATES,
                **counts,
            }
            (partial / MANIFEST).write_text(json.dumps(manifest, indent=1))
            partial.rename(target)
        finally:
            shutil.rmtree(partial, ignore_errors=True)
    log.info(f"doctune: hard negatives mined for the corpus: {target} ({counts})")
    return target


def mine(corpus: PreparedCorpus) -> tuple[np.ndarray, dict[str, int]]:
    """Every corpus row's ``MINED`` best BM25 neighbours (as ``Neighbours.rows``) and the counts of
    what was left out: ``near_duplicates`` passed over among the hits (a document's hits are read
    best first until ``MINED`` are kept), ``documents_short_of_neighbours`` (non-empty documents
    with fewer than ``MINED``)."""
    texts = [" ".join(document) for group in corpus.row_groups for document in corpus.read_group(group)]
    present = [row for row, text in enumerate(texts) if text]
    index = bm25_index([" ".join(texts[row].split()[:INDEX_WORDS]) for row in present])
    neighbours = np.full((len(texts), MINED), -1, dtype=np.int64)
    shingled = functools.lru_cache(maxsize=SHINGLED_DOCUMENTS)(lambda row: shingles(texts[row]))
    near, short = 0, 0
    hits_per_query = min(CANDIDATES + 1, len(present))  # the document itself is usually the first hit
    for start in range(0, len(present), QUERY_CHUNK):
        queries = present[start : start + QUERY_CHUNK]
        query_tokens = bm25_tokens([" ".join(texts[row].split()[:QUERY_WORDS]) for row in queries])
        hits, _ = index.retrieve(query_tokens, k=hits_per_query, show_progress=False)
        for row, found in zip(queries, hits.tolist()):
            kept: list[int] = []
            for other in (present[i] for i in found if present[i] != row):
                if similarity(shingled(row), shingled(other)) >= NEAR:
                    near += 1
                else:
                    kept.append(other)
                if len(kept) == MINED:
                    break
            short += len(kept) < MINED
            neighbours[row, : len(kept)] = kept
    return neighbours, {"near_duplicates": near, "documents_short_of_neighbours": short}
