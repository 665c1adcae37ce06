"""Real-text long-document retrieval: a passage from past the first 512 tokens of a long document
finds that document, scored on the whole document (the real-text side of LongEmbed, Zhu et al. 2024,
arXiv 2404.12096, Sec. 3.2, whose queries likewise need content spread through long documents).

For each document of the part longer than ``MIN_TOKENS`` (512) in the fixed tokenizer
(``evaluators.lengths``), the query is a run of consecutive sentences (``PASSAGE_TOKENS``: 32 to 96
tokens) starting at a seeded sentence that begins past both token 512 and the document's middle,
taken out of the document; the query ranks every long document of the part, each the rest of its
text. The passage's own words are gone, so no exact match finds it (BM25 scored 1.000 on both parts
while the passage stayed in place); what ties it to its document is the text around where it was,
past token 512, which a model that reads 512 tokens never sees.

Only as long as the text really is: the packaged news articles are mostly under 1,024 tokens, so
few queries fall in the longer buckets; every score is also reported per length bucket with its n,
and documents are never joined to make longer ones. A user's long collection fills every bucket
(``long-passage:<collection>``).
"""

from __future__ import annotations

import zlib

import numpy as np

from evaluators.lengths import token_counts
from evaluators.tasks.base import SPLIT_SEED, SPLITS, TASK_FAMILIES, Split, TaskMetadata, register_task
from evaluators.tasks.held_out_text import PACKAGED, CollectionTask, part_rule, part_texts, sentences, source_label
from evaluators.tasks.retrieval import Collection, RetrievalTask

MIN_TOKENS = 512  # the passage starts past this token, so a BERT-sized window never reads it
PASSAGE_TOKENS = (32, 96)  # a query's length: at least, at most (its first sentence may overrun)
SPECIAL_TOKENS = 2


def passage(sentence_tokens: list[int], rng: np.random.Generator) -> tuple[int, int] | None:
    """``(first, end)``: the sentences of a passage that starts past token ``MIN_TOKENS`` and the
    document's middle, ``PASSAGE_TOKENS`` long; None for a document with no such place."""
    starts = np.cumsum([SPECIAL_TOKENS - 1, *sentence_tokens])  # [CLS] first: sentence i starts at starts[i]
    total = starts[-1] + 1
    low, high = PASSAGE_TOKENS
    candidates = [
        i
        for i in range(len(sentence_tokens))
        if starts[i] >= max(MIN_TOKENS, total // 2) and sentence_tokens[i] <= high
    ]
    rng.shuffle(candidates)
    for first in candidates:
        end, size = first, 0
        while end < len(sentence_tokens) and size < low and size + sentence_tokens[end] <= high:
            size += sentence_tokens[end]
            end += 1
        if size >= low:
            return first, end
    return None


class LongPassageRetrieval(RetrievalTask):
    """Long-passage retrieval over ``source``'s long documents (module docstring)."""

    def __init__(self, budget, source: str = PACKAGED) -> None:
        super().__init__(budget)
        self.source = source
        self.metadata = _metadata(source)

    def read(self) -> dict[Split, Collection]:
        parts: dict[Split, Collection] = {}
        for split in SPLITS:
            rng = np.random.default_rng([SPLIT_SEED, zlib.crc32(f"{self.metadata.name}/{split}".encode())])
            texts = part_texts(self.source, split)
            long_texts = [t for t, n in zip(texts, token_counts(texts)) if n > MIN_TOKENS]
            corpus, queries, qrels = {}, {}, {}
            for i, text in enumerate(long_texts):
                units = sentences(text)
                found = passage([n - SPECIAL_TOKENS for n in token_counts(units)], rng)
                if found is None:
                    corpus[f"d{i}"] = text
                    continue
                first, end = found
                corpus[f"d{i}"] = " ".join(units[:first] + units[end:])
                queries[f"q{i}"] = " ".join(units[first:end])
                qrels[f"q{i}"] = {f"d{i}": 1}
            parts[split] = (corpus, queries, qrels)
        return parts


def _metadata(source: str) -> TaskMetadata:
    name = "news-passage-retrieval" if source == PACKAGED else f"long-passage:{source}"
    return TaskMetadata(
        name=name,
        type="retrieval",
        description="a passage of 32-96 tokens taken out of a long document, from past token 512 and its middle, "
        "retrieves the rest of that document among the part's documents over 512 tokens, each read whole",
        source=source_label(source),
        split=part_rule(source),
        main_score="ndcg_at_10",
        long_documents=True,
    )


@register_task
class NewsPassageRetrieval(LongPassageRetrieval):
    metadata = _metadata(PACKAGED)


@TASK_FAMILIES.register("long-passage:")
class CollectionPassageRetrieval(CollectionTask, LongPassageRetrieval):
    """Long-passage retrieval over a local collection's long documents (.jsonl, .txt, .parquet, or a directory)."""
