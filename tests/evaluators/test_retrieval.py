"""Retrieval scoring of the embedded encoder on real collections."""

from __future__ import annotations

import numpy as np
import pytest

from evaluators.tasks import make_task
from tests.conftest import shared_collection
from trainers.config import EvalBudget
from trainers.encoder import embed_texts, load_encoder

# all-MiniLM-L6-v2, mean pooling, 256 tokens, title + " " + text, on the whole of Cranfield: the
# value trec_eval gives for the same embeddings (0.382), so the metric path agrees with trec_eval.
CRANFIELD_NDCG10 = 0.3819
# The same model at 128 tokens on the first 40 judged queries and 400 documents (recorded).
CRANFIELD_SUBSET_NDCG10 = 0.5441


@pytest.fixture(scope="module")
def minilm(minilm_dir):
    return load_encoder(minilm_dir)


@pytest.fixture(scope="module")
def minilm_embedder(minilm):
    return lambda texts: embed_texts(*minilm, texts, pooling="mean", max_length=128)


def test_minilm_on_all_of_cranfield_agrees_with_trec_eval(minilm):
    task = make_task(f"beir:{shared_collection('cranfield')}", EvalBudget())
    task.load()
    assert (len(task.queries), len(task.corpus)) == (225, 1400)
    scores = task.evaluate(lambda texts: embed_texts(*minilm, texts, pooling="mean", max_length=256))
    assert scores["ndcg_at_10"] == pytest.approx(CRANFIELD_NDCG10, abs=1e-3)


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
