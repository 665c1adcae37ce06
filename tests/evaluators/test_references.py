"""Reference rows (BM25, the base as its users run it) and comparisons paired by item id."""

from __future__ import annotations

import numpy as np
import pytest

from doctune_core.noise import paired_gain, task_gain
from doctune_core.outcomes import Outcomes, mean_of_rows
from evaluators.plan import EvalBudget, EvalPlan
from evaluators.references import Reading, own_max_length, own_pooling, references


def _plan(tmp_path, **budget) -> EvalPlan:
    return EvalPlan(
        objectives={"objective": {"news-title-retrieval": 1.0, "r8-fewshot": 1.0}},
        actor_names=(),
        namespace="",
        budget=EvalBudget(
            max_queries=20, long_queries=6, max_documents=40, max_test=32, fewshot_k=2, repeats=2, **budget
        ),
        max_length=64,
        batch_size=16,
        threads=2,
        report_tasks=("needle-retrieval",),
        shared_embeddings=str(tmp_path / "shared"),
    )


def test_the_off_the_shelf_reference_reads_as_its_users_run_it(minilm_dir):
    assert own_max_length(minilm_dir) == 256  # sentence-transformers' max_seq_length, not its 512 positions
    assert own_pooling(minilm_dir) == "mean"
    bm25, truncated, windowed = references(minilm_dir)
    assert bm25.model is None and truncated.model == windowed.model == minilm_dir
    assert truncated.reading == Reading(256, "truncate") and windowed.reading == Reading(256, "chunk")


@pytest.mark.slow  # loads three tasks and embeds them twice with a real encoder: about 40 s
def test_reference_rows_score_the_same_items_as_an_encoder(minilm_dir, tmp_path):
    from evaluators.pool import Evaluator

    evaluator = Evaluator(_plan(tmp_path, long_length=256), str(tmp_path / "run"))
    tasks = ["news-title-retrieval", "r8-fewshot", "needle-retrieval"]
    bm25, truncated, windowed = references(minilm_dir)
    lexical = evaluator.reference_scores(bm25, "mean", tasks)
    assert set(lexical) == {"news-title-retrieval", "needle-retrieval"}  # BM25 has no probe
    # a planted name and its question share their rare words: BM25 finds nearly every needle
    assert lexical["needle-retrieval"]["test"]["main"] > 0.8
    assert lexical["news-title-retrieval"]["test"]["len_upto512_n"] >= 2
    as_users = evaluator.reference_scores(windowed, "mean", tasks)
    assert set(as_users) == set(tasks) and as_users["news-title-retrieval"]["chunked"] > 0
    encoder = evaluator.outcomes(minilm_dir, "mean", tasks)
    for reference in (bm25, truncated, windowed):
        theirs = evaluator.reference_outcomes(reference, "mean", tasks)
        for task, outcomes in theirs.items():
            assert outcomes.ids == encoder[task].ids  # the same items, in the same order
            gain = task_gain(encoder[task], outcomes, task)
            assert gain.undecided or gain.low <= gain.difference <= gain.high
            if task != "r8-fewshot":
                assert gain.by_stratum and all(g.n >= 2 for g in gain.by_stratum.values())
    # the windowed and truncated readings are cached apart: truncated at 256, windows of 256
    keys = {p.stem for p in (tmp_path / "shared").glob("*.npz")}
    assert any(k.endswith("-256-chunk") for k in keys) and any(k.endswith("-256") for k in keys)


def test_a_comparison_of_rows_scored_on_other_items_is_refused():
    a = Outcomes({}, np.array([1.0, 0.0, 1.0]), mean_of_rows, ids=("q1", "q2", "q3"))
    b = Outcomes({}, np.array([0.0, 0.0, 1.0]), mean_of_rows, ids=("q1", "q2", "q4"))
    with pytest.raises(ValueError, match="scored on different items"):
        paired_gain({"t": a}, {"t": b}, {"t": 1.0})
    same = Outcomes({}, np.array([0.0, 0.0, 1.0]), mean_of_rows, ids=("q1", "q2", "q3"))
    assert paired_gain({"t": a}, {"t": same}, {"t": 1.0}).difference == pytest.approx(1 / 3)
