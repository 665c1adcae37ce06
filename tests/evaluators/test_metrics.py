"""Metrics on hand-built cases, and against independent implementations (scikit-learn)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evaluators.metrics import ranking_scores


def _one(run: dict[str, float], judged: dict[str, int]) -> dict[str, float]:
    return ranking_scores({"q": run}, {"q": judged})


def test_ndcg_and_map_on_a_hand_built_ranking():
    run = {"d1": 0.9, "d2": 0.8, "d3": 0.7, "d4": 0.6}
    judged = {"d2": 2, "d4": 1, "d9": 1}
    dcg = 2 / math.log2(3) + 1 / math.log2(5)
    idcg = 2 / math.log2(2) + 1 / math.log2(3) + 1 / math.log2(4)
    scores = _one(run, judged)
    assert scores["ndcg_at_10"] == pytest.approx(dcg / idcg)
    # relevant at ranks 2 and 4 (precisions 1/2, 2/4), d9 never retrieved, 3 relevant in all
    assert scores["map_at_100"] == pytest.approx((1 / 2 + 2 / 4) / 3)
    assert scores["recall_at_100"] == pytest.approx(2 / 3)
    assert scores["mrr_at_10"] == pytest.approx(1 / 2)
    assert _one({"d2": 1.0, "d4": 0.5, "d9": 0.1}, judged)["ndcg_at_10"] == pytest.approx(1.0)


def test_mrr_counts_only_the_top_ten():
    run = {f"d{i:02d}": 1.0 - i / 100 for i in range(20)}
    assert _one(run, {"d09": 1})["mrr_at_10"] == pytest.approx(1 / 10)
    assert _one(run, {"d10": 1})["mrr_at_10"] == 0.0
    assert _one(run, {"d10": 1})["recall_at_100"] == 1.0


def test_ties_are_broken_by_descending_document_id_as_trec_eval_does():
    scores = _one({"a": 1.0, "b": 1.0}, {"b": 1})
    assert scores["ndcg_at_10"] == 1.0 and scores["mrr_at_10"] == 1.0
    assert _one({"a": 1.0, "b": 1.0}, {"a": 1})["mrr_at_10"] == 0.5


def test_unjudged_queries_are_skipped_and_unanswered_ones_score_zero():
    runs = {"q1": {"a": 1.0}, "q2": {"a": 1.0}}
    assert ranking_scores(runs, {"q1": {"a": 1}, "q2": {"x": 0}})["mrr_at_10"] == 1.0
    assert ranking_scores({"q1": {"a": 1.0}}, {"q1": {"a": 1}, "q3": {"a": 1}})["ndcg_at_10"] == 0.5
    with pytest.raises(ValueError, match="no query has a relevant document"):
        ranking_scores(runs, {"q1": {"a": 0}})


@settings(max_examples=60, deadline=None)
@given(
    grades=st.lists(st.integers(0, 3), min_size=2, max_size=12).filter(lambda g: any(g)),
    seed=st.integers(0, 2**16),
)
def test_ndcg_agrees_with_scikit_learn(grades, seed):
    # every judged document is ranked and scores are distinct, where both conventions coincide
    from sklearn.metrics import ndcg_score

    scores = np.random.default_rng(seed).permutation(len(grades)).astype(float)
    run = {f"d{i}": s for i, s in enumerate(scores)}
    judged = {f"d{i}": g for i, g in enumerate(grades)}
    expected = ndcg_score([grades], [scores], k=10)
    assert _one(run, judged)["ndcg_at_10"] == pytest.approx(expected, abs=1e-9)
