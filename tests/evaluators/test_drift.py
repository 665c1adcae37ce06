"""What training did to the geometry, reported beside the scores: how far short validation texts moved
from the start (``Evaluator.start_cosine``) and how alike a long task's documents look (``doc_cosine``)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from evaluators.plan import EvalBudget, EvalPlan
from evaluators.tasks.base import mean_pairwise_cosine

TASKS = ["news-title-retrieval", "r8-fewshot", "needle-retrieval"]


def test_the_mean_pairwise_cosine_takes_each_pair_once():
    vectors = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.6, 0.8]])
    # pairs: (0,1) 1, (0,2) 0, (0,3) 0.6, (1,2) 0, (1,3) 0.6, (2,3) 0.8
    assert mean_pairwise_cosine(vectors) == pytest.approx((1 + 0.6 + 0.6 + 0.8) / 6)
    assert np.isnan(mean_pairwise_cosine(vectors[:1]))


@pytest.fixture(scope="module")
def moved_minilm(minilm_dir, tmp_path_factory) -> str:
    """all-MiniLM-L6-v2 with its top layer's output weights moved by seeded noise."""
    import torch
    from transformers import AutoModel

    directory = tmp_path_factory.mktemp("moved") / "model"
    shutil.copytree(minilm_dir, directory)
    model = AutoModel.from_pretrained(directory)
    weight = model.encoder.layer[-1].output.dense.weight
    with torch.no_grad():
        weight += 0.05 * torch.randn(weight.shape, generator=torch.Generator().manual_seed(0))
    model.save_pretrained(directory)
    return str(directory)


@pytest.mark.slow  # loads three tasks and embeds their validation parts with two encoders: about 30 s
def test_short_texts_move_with_the_weights_and_long_documents_report_how_alike_they_look(
    minilm_dir, moved_minilm, tmp_path
):
    from evaluators.pool import Evaluator
    from evaluators.pool_calls import model_files

    plan = EvalPlan(
        objectives={"objective": dict.fromkeys(TASKS, 1.0)},
        actor_names=(),
        namespace="",
        budget=EvalBudget(max_queries=20, long_queries=6, max_documents=40, max_test=32, fewshot_k=2, repeats=2),
        max_length=64,
        batch_size=16,
        threads=2,
        parts=("val",),
    )
    evaluator = Evaluator(plan, str(tmp_path / "run"))
    unmoved = evaluator.start_cosine(minilm_dir, minilm_dir, "mean", TASKS)
    # the needle task's haystacks are long documents: no short texts to compare
    assert set(unmoved) == {"news-title-retrieval", "r8-fewshot"}
    assert all(value == pytest.approx(1.0, abs=1e-5) for value in unmoved.values())
    moved = evaluator.start_cosine(moved_minilm, minilm_dir, "mean", TASKS)
    assert set(moved) == set(unmoved) and all(0.0 < value < 0.999 for value in moved.values()), moved
    # sent as files, as the search's driver sends the winner and its start to an evaluator actor
    sent = evaluator.start_cosine(model_files(moved_minilm), model_files(minilm_dir), "mean", TASKS)
    assert sent == pytest.approx(moved, abs=1e-6)
    # a long task reports its documents' mean pairwise cosine beside its score, a short one does not
    scores = evaluator.score(minilm_dir, "mean", TASKS)
    assert -1.0 <= scores["needle-retrieval"]["val"]["doc_cosine"] <= 1.0
    assert "doc_cosine" not in scores["news-title-retrieval"]["val"]
    assert "test" not in scores["needle-retrieval"]  # validation only, as the plan says
