"""Reference rows: what a user already has, scored on the same items as every trial, never steering.

A search's leaderboard places its winner against these as well as against its baselines (the base
as given, and converted, untrained):

- ``reference-bm25``: BM25 on each retrieval task, ranking the same candidate pools the encoders
  rank (a needle task's pool is its haystack length). ``bm25s`` (Lucene's BM25, k1 1.5, b 0.75),
  English stop words removed, no stemming; it has no score on a task that is not retrieval.
- ``reference-off-the-shelf``: the base encoder as its users run it: the model the spec names
  (not the converted one) at its own length (sentence-transformers' ``max_seq_length``, 256 tokens
  for all-MiniLM-L6-v2; else its positions) and its own pooling (``1_Pooling``; else the search's),
  texts over it truncated;
- ``reference-off-the-shelf-windowed``: the same model over windows of that length covering the
  whole text, their pooled vectors averaged (``doctune_core.encoder.embed_texts``).

An encoder reference is embedded through the evaluators' cache like the base (``EvalPlan.
shared_embeddings``), so every search from the same base computes it once.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol, TypeVar

REFERENCE_PREFIX = "reference"
BASELINE_PREFIX = "baseline"  # the base encoder untrained: as given, converted (platform.results.leaderboard's ids)

RowKind = Literal["trial", "baseline", "reference"]


def row_kind(row_id: str) -> RowKind:
    """What a leaderboard row is, by its id: a trial's, a baseline (the base untrained) or a reference
    (what a user already has); the driver and ``doctune.Leaderboard`` both classify rows by it."""
    if row_id.startswith(REFERENCE_PREFIX):
        return "reference"
    return "baseline" if row_id.startswith(BASELINE_PREFIX) else "trial"


class RankedRow(Protocol):
    trial: str
    objective: float | None


R = TypeVar("R", bound=RankedRow)


def winner(rows: Sequence[R]) -> R | None:
    """The winner of a leaderboard's rows, ranked by the validation objective: the first trial with an
    objective (a baseline or a reference may rank above it, but is never the winner); None where no
    trial scored. The rule the driver's rows and ``doctune.Leaderboard`` both choose by."""
    return next((row for row in rows if row_kind(row.trial) == "trial" and row.objective is not None), None)


@dataclass(frozen=True)
class Reading:
    """How an encoder reads a task's texts: at most ``max_length`` tokens (None: the task's
    scoring length, ``EvalPlan.scoring_length``), texts over it as ``long_inputs`` says (None: as
    the task's metadata says)."""

    max_length: int | None = None
    long_inputs: Literal["truncate", "chunk"] | None = None


AS_TASKS_SAY = Reading()  # every task at its scoring length, its texts over it as its metadata says


@dataclass(frozen=True)
class Reference:
    """A reference row: BM25 (``model`` None) or an encoder read as ``reading`` says."""

    id: str
    description: str
    model: str | None = None
    reading: Reading = field(default_factory=Reading)
    pooling: str | None = None  # None: the search's


def own_max_length(model_dir: str) -> int:
    """The tokens a model's users embed with: sentence-transformers' ``max_seq_length`` where the
    model directory has one, else its positions (at most 512)."""
    from doctune_core.encoder import embedding_length

    config = Path(model_dir) / "sentence_bert_config.json"
    if config.exists():
        length = json.loads(config.read_text()).get("max_seq_length")
        if isinstance(length, int) and length > 0:
            return length
    return embedding_length(model_dir, 512)


def own_pooling(model_dir: str) -> str | None:
    """The pooling a sentence-transformers model directory declares (``1_Pooling/config.json``), or None."""
    config = Path(model_dir) / "1_Pooling" / "config.json"
    if not config.exists():
        return None
    modes = json.loads(config.read_text())
    for mode, name in (
        ("pooling_mode_cls_token", "cls"),
        ("pooling_mode_mean_tokens", "mean"),
        ("pooling_mode_max_tokens", "max"),
    ):
        if modes.get(mode):
            return name
    return None


def references(source_model: str) -> tuple[Reference, ...]:
    """The reference rows of a search whose base is ``source_model`` (before any conversion)."""
    length, pooling = own_max_length(source_model), own_pooling(source_model)
    return (
        Reference(f"{REFERENCE_PREFIX}-bm25", "BM25 (bm25s, k1 1.5, b 0.75), retrieval tasks only"),
        Reference(
            f"{REFERENCE_PREFIX}-off-the-shelf",
            f"the base as users run it: {length} tokens, longer texts truncated",
            source_model,
            Reading(length, "truncate"),
            pooling,
        ),
        Reference(
            f"{REFERENCE_PREFIX}-off-the-shelf-windowed",
            f"the base as users run it on long texts: averaged over {length}-token windows",
            source_model,
            Reading(length, "chunk"),
            pooling,
        ),
    )


def bm25_runs(task, split: str) -> dict[str, dict[str, float]]:
    """BM25's top documents and scores for every query of a retrieval task's part, each query
    ranking its own candidate pool (``RetrievalTask.pools``)."""
    from doctune_core.bm25 import bm25_index, bm25_tokens
    from evaluators.tasks.retrieval import TOP_K

    corpus, queries, _ = task.parts[split]
    runs: dict[str, dict[str, float]] = {}
    for doc_ids, query_ids in task.pools(split):
        index = bm25_index([corpus[d] for d in doc_ids])
        hits, scores = index.retrieve(
            bm25_tokens([queries[q] for q in query_ids]), k=min(TOP_K, len(doc_ids)), show_progress=False
        )
        for q, rows, values in zip(query_ids, hits, scores):
            runs[q] = {doc_ids[j]: float(s) for j, s in zip(rows.tolist(), values.tolist()) if doc_ids[j] != q}
    return runs
