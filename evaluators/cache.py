"""Embeddings cached per (model weights, pooling, max length, text), in memory and on disk.

The key of a model is the sha256 of its ``model.safetensors``, so the same weights under another
path (the exported ``best/``, a copied checkpoint) hit the same entries. The disk copy lives in
the run directory (``embeddings/<key>.npz``); re-scoring a checkpoint, the final report and a
resumed search embed nothing twice.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np

from trainers.encoder import weights_digest

__all__ = ["EmbeddingCache", "text_digest", "weights_digest"]


def text_digest(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


class EmbeddingCache:
    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self._tables: dict[str, dict[str, np.ndarray]] = {}
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
        self.directory.mkdir(parents=True, exist_ok=True)
        partial = self._file(key).with_suffix(".partial.npz")
        np.savez(partial, keys=np.array(list(table)), vectors=np.stack(list(table.values())))
        os.replace(partial, self._file(key))
