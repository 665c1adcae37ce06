from __future__ import annotations

import math

import pytest

from evaluators.metrics import mean_over_queries, mrr_at_k, ndcg_at_k, recall_at_k
from evaluators.tasks.probe import fewshot_indices


def test_ndcg_on_a_hand_built_ranking():
    run = {"d1": 0.9, "d2": 0.8, "d3": 0.7, "d4": 0.6}
    judged = {"d2": 2, "d4": 1, "d9": 1}
    dcg = 2 / math.log2(3) + 1 / math.log2(5)
    idcg = 2 / math.log2(2) + 1 / math.log2(3) + 1 / math.log2(4)
    assert ndcg_at_k(run, judged, 10) == pytest.approx(dcg / idcg)
    assert ndcg_at_k(run, judged, 1) == 0.0
    assert ndcg_at_k({"d2": 1.0, "d4": 0.5, "d9": 0.1}, judged, 10) == pytest.approx(1.0)


def test_recall_and_mrr():
    run = {"a": 3.0, "b": 2.0, "c": 1.0}
    assert recall_at_k(run, {"b": 1, "z": 1}, 2) == 0.5
    assert mrr_at_k(run, {"b": 1}, 10) == 0.5
    assert mrr_at_k(run, {"c": 1}, 2) == 0.0


def test_ties_are_broken_by_descending_document_id_as_trec_eval_does():
    assert ndcg_at_k({"a": 1.0, "b": 1.0}, {"b": 1}, 1) == 1.0


def test_mean_skips_unjudged_queries():
    runs = {"q1": {"a": 1.0}, "q2": {"a": 1.0}}
    assert mean_over_queries(mrr_at_k, runs, {"q1": {"a": 1}, "q2": {"x": 0}}, 10) == 1.0


def test_fewshot_draws_k_per_class_and_repeat_under_a_seed():
    labels = ["a"] * 20 + ["b"] * 10 + ["c"] * 2
    draw = fewshot_indices(labels, 4, seed=1)
    counts = {label: sum(labels[i] == label for i in draw) for label in "abc"}
    assert counts == {"a": 4, "b": 4, "c": 2}
    assert draw == fewshot_indices(labels, 4, seed=1)
    assert draw != fewshot_indices(labels, 4, seed=2)


def test_stratified_subsample_keeps_shares_and_rare_classes():
    from evaluators.tasks.probe import stratified_subsample

    labels = ["a"] * 80 + ["b"] * 18 + ["c"] * 1 + ["d"] * 1
    kept = stratified_subsample(labels, 50, seed=0)
    counts = {label: sum(labels[i] == label for i in kept) for label in "abcd"}
    assert counts == {"a": 40, "b": 9, "c": 1, "d": 1}
    assert kept == stratified_subsample(labels, 50, seed=0) and kept == sorted(kept)
    assert stratified_subsample(labels, 500) == list(range(100))
