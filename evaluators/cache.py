"""Embeddings cached per (model, pooling, max length, long-input policy, text), in memory and on disk.

The key of a model (``embedding_digest``) hashes everything in its directory that changes an
embedding: the weights, ``config.json`` (two Longformers converted from one encoder with different
attention windows share their weights, not their embeddings) and the tokenizer files; so the same
model under another path (the exported ``best/``, a copied checkpoint) hits the same entries. The
disk copy lives in the run directory (``embeddings/<key>.npz``) and is the source of truth:
re-scoring a checkpoint, the final report and a resumed search embed nothing twice. In memory only
the ``MEMORY_TABLES`` tables used last are kept, so a long search does not grow with every
checkpoint it scores.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from doctune_core.data.atomic import atomic_file
from doctune_core.encoder import weights_digest

MEMORY_TABLES = 8  # tables (one per model and task policy) kept in memory; the rest are read back from disk
# what besides the weights decides an embedding: the architecture and the tokenisation
EMBEDDING_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json")


def text_digest(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def embedding_digest(model_dir: str) -> str:
    """The cache key of a model directory: its weights and the files that shape its embeddings."""
    digest = hashlib.sha256(weights_digest(model_dir).encode())
    for name in EMBEDDING_FILES:
        path = Path(model_dir) / name
        if path.exists():
            digest.update(name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:24]


class EmbeddingCache:
    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self._tables: dict[str, dict[str, np.ndarray]] = {}  # in use order: the last used last
        self.hits = 0
        self.misses = 0

    def _file(self, key: str) -> Path:
        return self.directory / f"{key}.npz"

    def table(self, key: str) -> dict[str, np.ndarray]:
        if key not in self._tables:
            table: dict[str, np.ndarray] = {}
            if self._file(key).exists():
                with np.load(self._file(key)) as stored:
                    table = dict(zip(stored["keys"].tolist(), stored["vectors"]))
            self._tables[key] = table
        self._tables[key] = self._tables.pop(key)  # now the most recently used
        return self._tables[key]

    def embed(self, key: str, texts: list[str], embed_missing) -> np.ndarray:
        """Vectors for ``texts``; only texts not cached under ``key`` go to ``embed_missing``."""
        table = self.table(key)
        digests = [text_digest(t) for t in texts]
        missing = sorted({d: t for d, t in zip(digests, texts) if d not in table}.items())
        self.hits += len(texts) - sum(1 for d in digests if d not in table)
        self.misses += len(missing)
        if missing:
            vectors = embed_missing([t for _, t in missing])
            table.update(zip([d for d, _ in missing], vectors))
        return np.stack([table[d] for d in digests])

    def save(self, key: str) -> None:
        table = self._tables.get(key)
        if not table:
            return
        # a temporary file of its own: evaluators of two searches (or lanes of the suite) sharing the
        # cache may save the same entry at once
        with atomic_file(self._file(key)) as handle:
            np.savez(handle, keys=np.array(list(table)), vectors=np.stack(list(table.values())))
        while len(self._tables) > MEMORY_TABLES:  # saved: the least recently used can go
            oldest = next(iter(self._tables))
            if oldest != key and not self._file(oldest).exists():
                break  # never drop what only memory holds
            del self._tables[oldest]
