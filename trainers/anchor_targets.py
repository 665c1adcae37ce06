"""The anchor term's texts and targets (``trainers.losses.anchor``): short pretraining texts and the
start encoder's embeddings of them, computed once before any trial and kept in the cache.

``ensure_anchor_targets`` (the driver) draws ``ANCHOR_COUNT`` texts from the pretraining corpus,
each the first sentences of a document, from one sentence up to ``ANCHOR_WORDS`` words (their length
drawn uniformly, so titles' and paragraphs' lengths are both there), and embeds them with the model
every trial starts from, in eval mode, at the trial's length, once for each pooling a trial may
use. Every text is far below the base's 512 positions, which a converted Longformer reads as the
base did whichever way its new rows start (copied or interpolated:
``doctune_core.position_interpolation``), so one set of targets serves every trial. Kept in
``<cache>/anchors/<key>/`` (``texts.json``, ``<pooling>.npy``), the key a digest of the start's
weights, the corpus's content, the length and this module's rule; the directory is renamed into
place whole.

A worker (``AnchorTargets``) draws ``anchor_texts`` of them each step, seeded by (seed, rank, step);
every text is a pretraining text: the corpus holds no evaluation text (``doctune_core.data.news``).
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from doctune_core.data import PreparedCorpus, cache_dir
from doctune_core.data.atomic import exclusive_lock

ANCHOR_COUNT = 1024  # texts in the pool a trial draws from
ANCHOR_WORDS = 128  # a text's most words (a title is one sentence; a short article's lead is the most)
TEXTS = "texts.json"
RULE_VERSION = 1  # bump when the texts' rule changes


def anchor_dir(start_model: str, corpus: PreparedCorpus, max_length: int) -> Path:
    """Where the targets of trials starting from ``start_model`` on ``corpus`` are kept (a start not
    made yet, a base the search trains first, is named by its path until it is)."""
    from doctune_core.encoder import weights_digest

    start = weights_digest(start_model) if Path(start_model).is_dir() else str(start_model)
    key = f"{start}/{corpus.digest}/{max_length}/{ANCHOR_COUNT}/{ANCHOR_WORDS}/{RULE_VERSION}"
    return cache_dir() / "anchors" / hashlib.sha256(key.encode()).hexdigest()[:16]


def anchor_texts(corpus: PreparedCorpus, count: int = ANCHOR_COUNT, seed: int = 0) -> list[str]:
    """``count`` short texts, each the first sentences of a document spread evenly over the corpus."""
    rng = random.Random(seed)
    documents = [d for group in corpus.row_groups for d in corpus.read_group(group) if d]
    step = max(1, len(documents) // count)
    texts = []
    for sentences in documents[::step][:count]:
        words_wanted = rng.randint(1, ANCHOR_WORDS)
        taken: list[str] = []
        for sentence in sentences:
            if taken and len(" ".join(taken).split()) + len(sentence.split()) > words_wanted:
                break
            taken.append(sentence)
        texts.append(" ".join(" ".join(taken).split()[:ANCHOR_WORDS]))
    return texts


def ensure_anchor_targets(start_model: str, corpus: PreparedCorpus, poolings: Iterable[str], max_length: int) -> Path:
    """The targets' directory, with every pooling of ``poolings`` embedded (those missing are added)."""
    from doctune_core.encoder import embed_texts, load_encoder

    target = anchor_dir(start_model, corpus, max_length)
    with exclusive_lock(target):
        wanted = [p for p in dict.fromkeys(poolings) if not (target / f"{p}.npy").is_file()]
        if not wanted:
            return target
        partial = target.with_name(f"{target.name}.partial-{uuid.uuid4().hex[:8]}")
        try:
            if target.is_dir():
                shutil.copytree(target, partial)
            else:
                partial.mkdir(parents=True)
                (partial / TEXTS).write_text(json.dumps(anchor_texts(corpus)))
            texts = json.loads((partial / TEXTS).read_text())
            model, tokenizer = load_encoder(start_model)
            for pooling in wanted:
                with torch.inference_mode():
                    vectors = embed_texts(model, tokenizer, texts, pooling=pooling, max_length=max_length)
                np.save(partial / f"{pooling}.npy", vectors.astype(np.float32))
            shutil.rmtree(target, ignore_errors=True)
            partial.rename(target)
        finally:
            shutil.rmtree(partial, ignore_errors=True)
    return target


@dataclass(frozen=True)
class AnchorTargets:
    """A worker's pool: the texts and the start's embeddings of them for the trial's pooling."""

    texts: list[str]
    targets: torch.Tensor  # (ANCHOR_COUNT, d)

    @classmethod
    def load(cls, directory: str | Path, pooling: str) -> AnchorTargets:
        directory = Path(directory)
        texts = json.loads((directory / TEXTS).read_text())
        return cls(texts, torch.from_numpy(np.load(directory / f"{pooling}.npy")))

    def draw(self, count: int, rng: random.Random) -> tuple[list[str], torch.Tensor]:
        """``count`` texts (without repeats, unless the pool is smaller) and their targets (count, d)."""
        rows = rng.sample(range(len(self.texts)), min(count, len(self.texts)))
        return [self.texts[r] for r in rows], self.targets[rows]
