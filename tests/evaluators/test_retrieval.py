"""Retrieval scoring of the embedded encoder on real collections."""

from __future__ import annotations

import numpy as np
import pytest

from evaluators.tasks import make_task
from tests.conftest import shared_collection
from trainers.config import EvalBudget
from trainers.encoder import embed_texts, load_encoder

# all-MiniLM-L6-v2, mean pooling, 128 tokens, title + " " + text, on the first 40 judged queries
# of Cranfield and 400 documents (recorded; the whole collection's 0.3819 is in docs/baseline.md).
CRANFIELD_SUBSET_NDCG10 = 0.5441


@pytest.fixture(scope="module")
def minilm(minilm_dir):
    return load_encoder(minilm_dir)


@pytest.fixture(scope="module")
def minilm_embedder(minilm):
    return lambda texts: embed_texts(*minilm, texts, pooling="mean", max_length=128)


def test_minilm_scores_a_cranfield_subset_as_recorded(minilm_embedder):
    task = make_task(f"beir:{shared_collection('cranfield')}", EvalBudget(max_queries=40, max_documents=400))
    task.load()
    assert len(task.queries) == 40 and len(task.corpus) == 400
    scores = task.evaluate(minilm_embedder)
    assert scores["ndcg_at_10"] == pytest.approx(CRANFIELD_SUBSET_NDCG10, abs=2e-3)
    assert 0 < scores["recall_at_100"] <= 1 and scores["main"] == scores["ndcg_at_10"]


def test_a_random_encoder_scores_far_lower(minilm_embedder):
    task = make_task(f"beir:{shared_collection('cranfield')}", EvalBudget(max_queries=40, max_documents=400))
    task.load()
    rng = np.random.default_rng(0)
    random_scores = task.evaluate(lambda texts: rng.normal(size=(len(texts), 16)).astype(np.float32))
    assert random_scores["ndcg_at_10"] < 0.5 * CRANFIELD_SUBSET_NDCG10


def test_news_title_retrieval_uses_only_held_out_articles(minilm_embedder):
    from trainers.data.news import pretraining_articles

    task = make_task("news-title-retrieval", EvalBudget(max_queries=20, max_documents=40))
    task.load()
    trained = {a.text for a in pretraining_articles()}
    assert len(task.corpus) == 40 and not trained & set(task.corpus.values())
    assert task.evaluate(minilm_embedder)["ndcg_at_10"] > 0.8  # titles find their articles


def _write_collection(task, directory, hub_layout: bool) -> None:
    """``task``'s collection as a BEIR directory, or as a local copy of a Hub BEIR dataset
    (``<dir>`` with configs corpus / queries, judgments in ``<dir>-qrels``)."""
    import json

    directory.mkdir()
    with (directory / "corpus.jsonl").open("w") as handle:
        handle.writelines(json.dumps({"_id": d, "title": "", "text": t}) + "\n" for d, t in task.corpus.items())
    with (directory / "queries.jsonl").open("w") as handle:
        handle.writelines(json.dumps({"_id": q, "text": t}) + "\n" for q, t in task.queries.items())
    qrels = directory.parent / f"{directory.name}-qrels" if hub_layout else directory / "qrels"
    qrels.mkdir()
    rows = [f"{q}\t{d}\t{r}" for q, judged in task.qrels.items() for d, r in judged.items()]
    (qrels / "test.tsv").write_text("\n".join(["query-id\tcorpus-id\tscore", *rows]) + "\n")
    if hub_layout:
        configs = "".join(
            f"- config_name: {name}\n  data_files:\n  - split: {name}\n    path: {name}.jsonl\n"
            for name in ("corpus", "queries")
        )
        (directory / "README.md").write_text(f"---\nconfigs:\n{configs}---\n")


def test_a_hub_beir_dataset_scores_as_the_same_collection_on_disk(minilm_embedder, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf-cache"))
    news = make_task("news-title-retrieval", EvalBudget(max_queries=15, max_documents=30))
    news.load()
    _write_collection(news, tmp_path / "local", hub_layout=False)
    _write_collection(news, tmp_path / "hub-copy", hub_layout=True)
    scores = []
    for name in (f"beir:{tmp_path / 'local'}", f"beir-hf:{tmp_path / 'hub-copy'}"):
        task = make_task(name, EvalBudget())
        task.load()
        assert (len(task.queries), len(task.corpus)) == (15, 30)
        scores.append(task.evaluate(minilm_embedder))
    assert scores[0] == scores[1] and scores[0]["ndcg_at_10"] > 0.8


def test_blocked_numpy_and_faiss_top_k_agree(monkeypatch):
    from evaluators.tasks import retrieval

    rng = np.random.default_rng(0)
    docs = rng.normal(size=(3000, 32)).astype(np.float32)
    queries = rng.normal(size=(40, 32)).astype(np.float32)
    docs /= np.linalg.norm(docs, axis=1, keepdims=True)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    full = queries @ docs.T
    monkeypatch.setattr(retrieval, "QUERY_BLOCK", 7)  # blocks that do not divide the queries
    blocked = retrieval.top_k(queries, docs, 10)
    monkeypatch.setattr(retrieval, "FAISS_MIN_DOCUMENTS", 1000)
    searched = retrieval.top_k(queries, docs, 10)  # faiss-cpu is in the test extra
    for i, (mine, theirs) in enumerate(zip(blocked, searched)):
        expected = np.argsort(-full[i])[:10]
        assert {j for j, _ in mine} == {j for j, _ in theirs} == set(expected.tolist())
        assert dict(theirs) == pytest.approx({j: float(full[i, j]) for j in expected}, abs=1e-5)
