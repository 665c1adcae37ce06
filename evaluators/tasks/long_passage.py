"""Real-text long-document retrieval that the start of a document cannot decide: passages from past
token 512 of long documents, chosen to share as little as possible with the document's start, each
retrieving the rest of its document read whole (the real-text side of LongEmbed, Zhu et al. 2024,
arXiv 2404.12096, Sec. 3.2, whose queries likewise need content deep in long documents).

For each document of the part longer than ``MIN_TOKENS`` (512) in the fixed tokenizer
(``evaluators.lengths``), one passage is taken from each 512-token span past its first 512 tokens (at
most ``MAX_PASSAGES``): a run of consecutive sentences (``PASSAGE_TOKENS``: 32 to 96 tokens) starting
at a sentence inside the span. Of a span's possible passages, the one sharing the fewest content
words with the document's opening (its first ``OPENING_TOKENS`` tokens, what a BERT-sized encoder
reads) is taken, ties in a seeded order: evidence the start does not state. Every passage is taken
out of its document, so no exact match finds it (BM25 scored 1.000 while passages stayed in place);
what ties a passage to its document is the text around where it was, past token 512, which a model
that reads 512 tokens never sees. The choice is a rule on the text alone (no model scores anything),
so a user's long collection gets the same construction (``long-passage:<collection>``). A lexical
rule lowers BM25 too: its words are what the passage shares with the opening.

Every query ranks every long document of its part (chance acc@1: one over their number). Only as
long as the text really is: documents are never joined to make longer ones, and every score is also
reported per length bucket with its n.
"""

from __future__ import annotations

import re
import zlib

import numpy as np

from evaluators.lengths import token_counts
from evaluators.tasks.base import SPLIT_SEED, SPLITS, TASK_FAMILIES, Split, TaskMetadata, register_task
from evaluators.tasks.held_out_text import PACKAGED, CollectionTask, part_rule, part_texts, sentences, source_label
from evaluators.tasks.retrieval import Collection, RetrievalTask

MIN_TOKENS = 512  # passages start past this token, so a BERT-sized window never reads where they were
OPENING_TOKENS = 512  # a document's start: what a BERT-sized window reads
SPAN_TOKENS = 512  # one passage per span of this many tokens past MIN_TOKENS
MAX_PASSAGES = 3  # per document, so the longest documents do not fill the part
PASSAGE_TOKENS = (32, 96)  # a query's length: at least, at most (its first sentence may overrun)
SPECIAL_TOKENS = 2
_WORD = re.compile(r"[a-z]+")


def content_words(text: str) -> set[str]:
    """Lower-cased words of three letters or more, English stop words (scikit-learn's list) left out."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return {w for w in _WORD.findall(text.lower()) if len(w) > 2 and w not in ENGLISH_STOP_WORDS}


def passages(units: list[str], tokens: list[int], rng: np.random.Generator) -> list[tuple[int, int]]:
    """``[(first, end), ...]``: the sentence ranges of a document's passages (``units``, their
    ``tokens``), one per ``SPAN_TOKENS`` span past token ``MIN_TOKENS`` (at most ``MAX_PASSAGES``),
    ``PASSAGE_TOKENS`` long, none overlapping; in each span the one sharing the fewest content words
    with the opening, ties in ``rng``'s order."""
    starts = np.cumsum([SPECIAL_TOKENS - 1, *tokens])  # [CLS] first: sentence i starts at starts[i]
    opening = content_words(" ".join(u for u, at in zip(units, starts) if at < OPENING_TOKENS))
    low, high = PASSAGE_TOKENS
    found: list[tuple[int, int]] = []
    span = MIN_TOKENS
    while span < starts[-1] and len(found) < MAX_PASSAGES:
        taken = found[-1][1] if found else 0
        options = []
        for first in rng.permutation(np.arange(taken, len(units))).tolist():
            if not span <= starts[first] < span + SPAN_TOKENS or tokens[first] > high:
                continue
            end, size = first, 0
            while end < len(units) and size < low and size + tokens[end] <= high:
                size += tokens[end]
                end += 1
            if size >= low:
                options.append((first, end))
        if options:  # min keeps the first of equals: the seeded order breaks ties
            found.append(min(options, key=lambda o: len(content_words(" ".join(units[o[0] : o[1]])) & opening)))
        span += SPAN_TOKENS
    return sorted(found)


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
                taken = passages(units, [n - SPECIAL_TOKENS for n in token_counts(units)], rng)
                out = {j for first, end in taken for j in range(first, end)}
                corpus[f"d{i}"] = " ".join(u for j, u in enumerate(units) if j not in out)
                for k, (first, end) in enumerate(taken):
                    queries[f"q{i}-{k}"] = " ".join(units[first:end])
                    qrels[f"q{i}-{k}"] = {f"d{i}": 1}
            parts[split] = (corpus, queries, qrels)
        return parts


def _metadata(source: str) -> TaskMetadata:
    name = "news-passage-retrieval" if source == PACKAGED else f"long-passage:{source}"
    return TaskMetadata(
        name=name,
        type="retrieval",
        description=f"a passage of 32-96 tokens from past token 512 of a long document (one per 512-token span, at "
        f"most {MAX_PASSAGES}; the one sharing the fewest content words with the first {OPENING_TOKENS} tokens), "
        "taken out, retrieves the rest of that document among the part's documents over 512 tokens, each read whole",
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
