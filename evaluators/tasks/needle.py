"""Needle and passkey retrieval: LongEmbed's synthetic long-document tasks (Zhu et al. 2024,
arXiv 2404.12096, Sec. 3.1), built as LongEmbed builds them, from real held-out text.

Each length (256, 512, 1,024, 2,048, 4,096 tokens, the lengths up to the task's scoring length
``EvalBudget.long_length``; a shorter scoring length gets one haystack length, its own;
``EvalBudget.haystacks: longest`` keeps the longest alone) has a pool of haystacks, each with one
fact planted at a set depth (10%, 50%, 90% of the way in). ``EvalBudget.long_queries`` of them are
queried (50 at the benchmark size), and the pool holds twice as many (100): LongEmbed's 50 queries
against 100 candidates a length. A query ranks only the haystacks of its own length, so a length's
score says whether an encoder still carries one sentence of that many tokens. The main score is
acc@1 (whether the planted haystack ranks first; chance is one over the pool), with nDCG@10 beside
it; both also per length (``len_*``), per depth (``depth10`` ...) and per cell (``len1024_depth50``
...).

- Needle: the fact is a sentence about a person, from ``NEEDLE_TEMPLATES`` ("{name} keeps bees on
  the flat roof of a bakery.") and its question ("Where does {name} keep bees?"). Every template a
  pool uses is planted in at least two of its haystacks, about different people, so a template's
  topic words never pick the haystack: only whom the fact is about decides.
- Passkey: LongEmbed's one frame ("The pass key of Amara Szabo is 52817. Remember it. 52817 is the
  pass key of Amara Szabo."), asked as "What is the pass key of Amara Szabo?": the haystacks differ
  only in the person and the key.

Everyone in a pool is a different person. BM25 solves this shape (the person's name is a rare
exact match); it is reported beside the encoders with chance.

The haystack is the part's own held-out text (``evaluators.tasks.held_out_text``): whole sentences of
documents in a seeded order, no sentence twice in one haystack. The two parts draw their templates
and names from disjoint halves (``evaluators.tasks.needle_facts``) and their text from disjoint
documents, so validation and test share nothing but the procedure. Every length is counted in the
fixed tokenizer (``evaluators.lengths``), special tokens included: a 1,024-token document is at
most 1,024 tokens there, and within a sentence of it.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np

from evaluators.lengths import token_counts
from evaluators.tasks.base import SPLIT_SEED, SPLITS, TASK_FAMILIES, Split, TaskMetadata, register_task
from evaluators.tasks.held_out_text import PACKAGED, CollectionTask, part_rule, part_texts, sentences, source_label
from evaluators.tasks.needle_facts import (
    FIRST_NAMES,
    NEEDLE_TEMPLATES,
    PASSKEY_FACT,
    PASSKEY_QUESTION,
    SURNAMES,
    part_half,
)
from evaluators.tasks.retrieval import Collection, RetrievalTask

HAYSTACK_LENGTHS = (256, 512, 1024, 2048, 4096)  # LongEmbed's lengths up to 4,096 (its synthetic tasks go to 32k)
POOL_PER_QUERY = 2  # haystacks a length per query: LongEmbed's 100 candidates for 50 queries
DEPTHS = (0.1, 0.5, 0.9)
SPECIAL_TOKENS = 2  # [CLS] and [SEP] in the fixed tokenizer
MIN_FILL = 0.9  # a haystack must reach this share of its length, or the text is too short for it


@dataclass(frozen=True)
class Fact:
    """One planted fact: the sentence and the question asking for it."""

    sentence: str
    question: str


def haystack_lengths(long_length: int) -> tuple[int, ...]:
    """The set lengths a task scored at ``long_length`` tokens builds: LongEmbed's up to it, or that
    length alone where it is below the shortest (a smoke profile's)."""
    return tuple(n for n in HAYSTACK_LENGTHS if n <= long_length) or (long_length,)


class Haystack:
    """The sentences of one part's text, their token counts, and documents of set lengths made of
    them with a sentence planted at a set depth."""

    def __init__(self, texts: list[str], rng: np.random.Generator) -> None:
        self.documents = [sentences(t) for t in texts]
        flat = [s for doc in self.documents for s in doc]
        counts = iter(n - SPECIAL_TOKENS for n in token_counts(flat))
        self.tokens = [[next(counts) for _ in doc] for doc in self.documents]
        self.rng = rng

    def build(self, length: int, depth: float, needle: str) -> list[str]:
        """The sentences of a document of at most ``length`` tokens: filler sentences taken document by
        document in a seeded order, none twice, with ``needle`` inserted at the sentence boundary
        nearest ``depth``."""
        (needle_tokens,) = token_counts([needle])
        budget = length - needle_tokens  # token_counts counted the special tokens once, here
        chosen: list[str] = []
        sizes: list[int] = []
        used: set[str] = set()
        filled = 0
        for d in self.rng.permutation(len(self.documents)):
            for sentence, n in zip(self.documents[d], self.tokens[d]):
                if sentence in used or filled + n > budget:
                    continue
                chosen.append(sentence)
                sizes.append(n)
                used.add(sentence)
                filled += n
            if filled >= MIN_FILL * budget:
                break
        if filled < MIN_FILL * budget:
            raise ValueError(
                f"its part holds {filled} tokens of distinct sentences that fit, too few for a "
                f"{length}-token document; give it a larger collection or a shorter long_length"
            )
        ends = np.cumsum([0, *sizes])
        at = int(np.argmin(np.abs(ends - depth * ends[-1])))
        return [*chosen[:at], needle, *chosen[at:]]


class NeedleRetrieval(RetrievalTask):
    """Planted facts in haystacks of set lengths (module docstring) made of ``source``'s text
    (``evaluators.tasks.held_out_text``); subclasses say which facts (``kind``)."""

    main_metric = "acc_at_1"
    length_grid = True
    kind: str

    def __init__(self, budget, source: str = PACKAGED) -> None:
        super().__init__(budget)
        self.source = source
        self.metadata = _metadata(self.kind, source)

    def facts(self, split: Split, names: list[str], rng: np.random.Generator) -> list[Fact]:
        raise NotImplementedError

    def read(self) -> dict[Split, Collection]:
        lengths = haystack_lengths(self.budget.long_length)
        if self.budget.haystacks == "longest":
            lengths = lengths[-1:]
        queried = self.budget.long_queries
        parts: dict[Split, Collection] = {}
        self.cells: dict[Split, dict[str, tuple[int, float]]] = {}  # query id -> (length, depth)
        self.haystack_ids: dict[Split, dict[int, list[str]]] = {}  # length -> its pool's document ids
        for split in SPLITS:
            rng = np.random.default_rng([SPLIT_SEED, zlib.crc32(f"{self.metadata.name}/{split}".encode())])
            haystack = Haystack(part_texts(self.source, split), rng)
            first, last = part_half(FIRST_NAMES, split), part_half(SURNAMES, split)
            people = [f"{f} {s}" for f in first for s in last]
            corpus, queries, qrels, cells, pools = {}, {}, {}, {}, {}
            for length in lengths:
                size = POOL_PER_QUERY * queried
                names = [people[i] for i in rng.choice(len(people), size, replace=False)]  # one person a haystack
                facts = self.facts(split, names, rng)
                pools[length] = []
                for i, fact in enumerate(facts):
                    depth = DEPTHS[i % len(DEPTHS)]
                    key = f"{length}-{round(depth * 100)}-{i}"
                    try:
                        corpus[f"d{key}"] = " ".join(haystack.build(length, depth, fact.sentence))
                    except ValueError as err:
                        raise ValueError(f"task {self.metadata.name}, {split} part: {err}") from None
                    pools[length].append(f"d{key}")
                    if i < queried:  # the facts come in a seeded order; the first of them are asked
                        queries[f"q{key}"], qrels[f"q{key}"] = fact.question, {f"d{key}": 1}
                        cells[f"q{key}"] = (length, depth)
            parts[split], self.cells[split], self.haystack_ids[split] = (corpus, queries, qrels), cells, pools
        return parts

    def load(self) -> None:
        self.parts = self.read()  # built within the budget: nothing to cut
        for split, (corpus, queries, _) in self.parts.items():
            self.sizes[split] = {"documents": (len(corpus), len(corpus)), "queries": (len(queries), len(queries))}
        self._check_queries()
        self.document_lengths = {split: self._relevant_lengths(*self.parts[split]) for split in self.parts}

    def pools(self, split: Split) -> list[tuple[list[str], list[str]]]:
        """One pool per haystack length: a query ranks the haystacks of its own length, queried or not."""
        cells = self.cells[split]
        return [
            (documents, [q for q in cells if cells[q][0] == length])
            for length, documents in self.haystack_ids[split].items()
        ]

    def query_strata(self, split: Split, query_ids: list[str]) -> dict[str, np.ndarray]:
        """The length buckets, then rows by depth and by (length, depth) cell."""
        cells = [self.cells[split][q] for q in query_ids]
        strata = super().query_strata(split, query_ids)
        for depth in DEPTHS:
            strata[f"depth{round(depth * 100)}"] = np.flatnonzero([d == depth for _, d in cells])
        for length in dict.fromkeys(n for n, _ in cells):
            for depth in DEPTHS:
                rows = np.flatnonzero([c == (length, depth) for c in cells])
                strata[f"len{length}_depth{round(depth * 100)}"] = rows
        return strata


def _cycled(items: tuple, count: int, rng: np.random.Generator) -> list:
    """``count`` items, every one used before any is used again, in seeded orders."""
    out: list = []
    while len(out) < count:
        out.extend(items[i] for i in rng.permutation(len(items)))
    return out[:count]


class NeedleFacts(NeedleRetrieval):
    kind = "needle"

    def facts(self, split: Split, names: list[str], rng: np.random.Generator) -> list[Fact]:
        """One fact a name; a pool uses at most half as many templates as it has haystacks, so each
        template it uses is planted at least twice (module docstring)."""
        templates = part_half(NEEDLE_TEMPLATES, split)
        used = [templates[i] for i in rng.choice(len(templates), min(len(templates), len(names) // 2), replace=False)]
        return [
            Fact(fact.format(name=n), question.format(name=n))
            for n, (fact, question) in zip(names, _cycled(used, len(names), rng))
        ]


class PasskeyFacts(NeedleRetrieval):
    kind = "passkey"

    def facts(self, split: Split, names: list[str], rng: np.random.Generator) -> list[Fact]:
        keys = rng.integers(10_000, 100_000, len(names))
        return [
            Fact(PASSKEY_FACT.format(name=n, key=k), PASSKEY_QUESTION.format(name=n))
            for n, k in zip(names, keys.tolist())
        ]


def _metadata(kind: str, source: str) -> TaskMetadata:
    what = {
        "needle": "a sentence about a person planted in real text (21 templates per part, each in at least two "
        "haystacks of a length about different people)",
        "passkey": "a person's five-digit pass key planted in real text (LongEmbed's one frame)",
    }[kind]
    name = f"{kind}-retrieval" if source == PACKAGED else f"{kind}:{source}"
    return TaskMetadata(
        name=name,
        type="retrieval",
        description=f"LongEmbed-style {kind} retrieval: {what} at 10/50/90% depth of haystacks of 256 to "
        "4,096 tokens; a question ranks the haystacks of its length, twice as many as are queried; acc@1",
        source=source_label(source),
        split=part_rule(source) + "; needle templates and names from disjoint halves",
        main_score="acc_at_1",
        long_documents=True,
    )


@register_task
class NeedleRetrievalTask(NeedleFacts):
    metadata = _metadata("needle", PACKAGED)


@register_task
class PasskeyRetrievalTask(PasskeyFacts):
    metadata = _metadata("passkey", PACKAGED)


@TASK_FAMILIES.register("needle:")
class CollectionNeedleTask(CollectionTask, NeedleFacts):
    """Needle retrieval in haystacks of a local collection's text (.jsonl, .txt, .parquet, or a directory)."""


@TASK_FAMILIES.register("passkey:")
class CollectionPasskeyTask(CollectionTask, PasskeyFacts):
    """Passkey retrieval in haystacks of a local collection's text (.jsonl, .txt, .parquet, or a directory)."""
