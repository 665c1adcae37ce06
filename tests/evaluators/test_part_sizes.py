"""The part-size warning's references are the measured ones (bench/results/ranking_noise.json)."""

from __future__ import annotations

import json

import pytest

from evaluators.part_sizes import references
from tests.conftest import ROOT


def test_the_references_are_the_medians_bench_ranking_noise_measured():
    measured = json.loads((ROOT / "bench" / "results" / "ranking_noise.json").read_text())["tasks"]
    declared = references()
    assert set(declared) == {"retrieval", "probe"}
    for task, reference in declared.values():
        figures = measured[task]
        assert reference.sigma == pytest.approx(figures["sigma"], abs=5e-4)
        assert reference.typical_difference == pytest.approx(figures["typical_difference"], abs=5e-5)


@pytest.mark.parametrize("profile", ["local", "full"])
def test_the_objective_and_the_long_tasks_pooled_are_decided_with_margin_at_the_shipped_sizes(profile):
    """At the default search's sizes the rule for "too few items to decide" lets through tasks that
    carry at least 0.1 more than half the weight of the objective and of its long-document tasks
    pooled, on both parts: no gain a search prints is decided on the boundary itself."""
    from doctune_core.noise import DECIDED_MARGIN, DECIDED_WEIGHT, decided_share, undecided_part
    from evaluators.tasks import make_task, task_class
    from evaluators.tasks.retrieval import BINARY_METRICS
    from platform.spec import load_spec

    spec = load_spec("docsplit_long", profile)[0]
    weights = spec.search.objective.tasks
    long_tasks = {task: w for task, w in weights.items() if task_class(task).metadata.long_documents}
    assert set(long_tasks) == {"needle-retrieval", "passkey-retrieval", "news-passage-retrieval"}
    limits = spec.evaluation.limits
    tasks = {task: make_task(task, limits) for task in weights}
    for task in tasks.values():
        task.load()
    for split in ("val", "test"):
        undecided = {
            name
            for name, task in tasks.items()
            if undecided_part(
                task.item_count(split),
                binary=getattr(task, "main_metric", None) in BINARY_METRICS,
                draws=limits.repeats if task.metadata.type == "probe" else None,
            )
        }
        for gain in (weights, long_tasks):
            assert decided_share(gain, undecided) >= DECIDED_WEIGHT + DECIDED_MARGIN, (split, sorted(undecided))
