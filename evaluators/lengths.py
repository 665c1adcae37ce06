"""Document lengths, counted in one fixed tokenizer, and the length buckets scores are broken down by.

Every length doctune reports (a retrieval task's score by document length, a long-document task's
set lengths, the dry run's table of each task's documents) is counted in the same tokenizer, whatever
encoder is scored: BERT's uncased WordPiece as the packaged all-MiniLM-L6-v2 carries it (30,522
tokens), the full text with its two special tokens, never truncated. So "a 2,048-token document"
means the same text for every row of a leaderboard. BERT's pre-tokenizer splits on whitespace and
punctuation, so the tokens of sentences joined by spaces add up (``evaluators.tasks.needle`` sizes
its documents on that).

Buckets follow LongEmbed's lengths (Zhu et al. 2024, arXiv 2404.12096, Sec. 3): up to 512 tokens
(what a BERT-sized encoder reads whole), 513-1,024, 1,025-2,048, 2,049-4,096 and over 4,096.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import lru_cache

import numpy as np

LENGTH_TOKENIZER = "all-minilm-l6-v2"  # a packaged alias (doctune_core.encoder.PACKAGED_MODELS)
BUCKET_EDGES = (512, 1024, 2048, 4096)  # upper bounds, inclusive


@lru_cache(maxsize=1)
def length_tokenizer():
    from transformers import AutoTokenizer

    from doctune_core.encoder import resolve_model

    return AutoTokenizer.from_pretrained(resolve_model(LENGTH_TOKENIZER))


def token_counts(texts: Sequence[str]) -> list[int]:
    """Each text's full length in the fixed tokenizer, special tokens included."""
    if not texts:
        return []
    # verbose=False: full lengths are wanted, no "longer than the maximum" warning
    ids = length_tokenizer()(list(texts), add_special_tokens=False, verbose=False)["input_ids"]
    return [len(i) + 2 for i in ids]  # [CLS] and [SEP]


def bucket_label(tokens: int) -> str:
    """The bucket of a document of ``tokens`` tokens: ``len_upto512``, ``len_513to1024``, ...,
    ``len_over4096`` (names that survive CSV headers and TensorBoard tags)."""
    low = 0
    for edge in BUCKET_EDGES:
        if tokens <= edge:
            return f"len_upto{edge}" if low == 0 else f"len_{low + 1}to{edge}"
        low = edge
    return f"len_over{BUCKET_EDGES[-1]}"


def bucket_title(label: str) -> str:
    """A bucket's label for a person: ``≤512``, ``513-1024``, ``>4096``."""
    body = label.removeprefix("len_")
    return body.replace("upto", "≤").replace("over", ">").replace("to", "-")


BUCKET_LABELS = (*tuple(bucket_label(edge) for edge in BUCKET_EDGES), bucket_label(BUCKET_EDGES[-1] + 1))


def buckets(lengths: Iterable[int]) -> dict[str, np.ndarray]:
    """Row indices per bucket (in ``BUCKET_LABELS`` order; empty buckets left out)."""
    labels = [bucket_label(n) for n in lengths]
    return {
        label: np.flatnonzero(np.array([x == label for x in labels], dtype=bool))
        for label in BUCKET_LABELS
        if label in labels
    }


def length_summary(lengths: Sequence[int]) -> dict[str, int]:
    """Median, 90th percentile and maximum of ``lengths``, and how many exceed 512 tokens."""
    if not lengths:
        return {"documents": 0}
    values = np.asarray(lengths)
    return {
        "documents": len(values),
        "median": int(np.median(values)),
        "p90": int(np.percentile(values, 90)),
        "max": int(values.max()),
        "over_512": int((values > BUCKET_EDGES[0]).sum()),
    }


def task_length_lines(plan) -> list[str]:
    """For the dry run: each task of an ``EvalPlan`` (objective and report-only), the tokens its texts
    are embedded at and the full lengths of the documents it scores (loading its data, no model)."""
    from evaluators.tasks import make_task

    lines = []
    for name in (*plan.tasks, *plan.report_tasks):
        task = make_task(name, plan.budget)
        task.load()
        length = plan.scoring_length(task.metadata.long_documents)
        kind = "long-document task" if task.metadata.long_documents else "task"
        summary = length_summary(token_counts(task.document_texts()))
        documents = (
            f"{summary['documents']} documents, median {summary['median']:,} tokens, 90th percentile "
            f"{summary['p90']:,}, longest {summary['max']:,}, {summary['over_512']} over 512"
            if summary["documents"]
            else "its items are not documents"
        )
        lines.append(f"{kind} {name}: scored at {length:,} tokens; {documents}")
    return lines
