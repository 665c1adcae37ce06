from __future__ import annotations

import pytest

from platform.resources import TRIAL_CPU, InfeasibleResources, plan_resources
from platform.spec.schema import EvaluationSection, TrainSection


def test_two_cpus_fit_one_trial_beside_one_evaluator():
    plan = plan_resources(
        TrainSection(workers=2, cpus_per_worker=0.5, gpus_per_worker=0),
        EvaluationSection(evaluators=1, cpus_per_evaluator=0.5),
        4,
        None,
        {"CPU": 2},
    )
    assert plan.max_concurrent == 1
    assert plan.trial_cpus == pytest.approx(1 + TRIAL_CPU)


def test_concurrency_follows_the_rule_on_a_gpu_cluster():
    # 4 nodes x 8 GPUs x 32 CPUs; 4 one-GPU workers per trial; 2 evaluators of 4 CPUs
    plan = plan_resources(
        TrainSection(workers=4, cpus_per_worker=4, gpus_per_worker=1),
        EvaluationSection(evaluators=2, cpus_per_evaluator=4),
        32,
        None,
        {"CPU": 128, "GPU": 32},
    )
    assert plan.max_concurrent == 7  # CPUs bind: (128 - 8) / 16.01 = 7.49; GPUs would allow 8
    used = plan.max_concurrent * plan.trial_cpus + plan.evaluator_cpus
    assert used <= 128


def test_spec_cap_and_sample_count_limit_concurrency():
    train, evaluation = TrainSection(workers=1, cpus_per_worker=1, gpus_per_worker=0), EvaluationSection(evaluators=1)
    assert plan_resources(train, evaluation, 3, None, {"CPU": 64}).max_concurrent == 3
    assert plan_resources(train, evaluation, 30, 2, {"CPU": 64}).max_concurrent == 2


@pytest.mark.parametrize(
    ("train", "cluster", "needle"),
    [
        (TrainSection(workers=4, cpus_per_worker=1, gpus_per_worker=0), {"CPU": 2}, "4.01 CPU"),
        (TrainSection(workers=2, cpus_per_worker=1, gpus_per_worker=1), {"CPU": 64}, "2 GPU"),
    ],
)
def test_an_infeasible_trial_is_refused_with_the_numbers(train, cluster, needle):
    with pytest.raises(InfeasibleResources, match=needle):
        plan_resources(train, EvaluationSection(evaluators=1, cpus_per_evaluator=0.5), 2, None, cluster)
