from __future__ import annotations

import pytest

from platform.cluster.resources import TRIAL_CPU, InfeasibleResources, gpus_taken, plan_resources
from platform.spec.schema import EvaluationSection, TrainSection


def test_two_cpus_fit_one_trial_beside_one_evaluator():
    plan = plan_resources(
        TrainSection(workers=2, cpus_per_worker=0.5, gpus_per_worker=0),
        EvaluationSection(evaluators=1, cpus_per_evaluator=0.5, gpus_per_evaluator=0.0),
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
        EvaluationSection(evaluators=2, cpus_per_evaluator=4, gpus_per_evaluator=0.0),
        32,
        None,
        {"CPU": 128, "GPU": 32},
    )
    assert plan.max_concurrent == 7  # CPUs bind: (128 - 8) / 16.01 = 7.49; GPUs would allow 8
    used = plan.max_concurrent * plan.trial_cpus + plan.evaluator_cpus
    assert used <= 128


def test_spec_cap_and_sample_count_limit_concurrency():
    train = TrainSection(workers=1, cpus_per_worker=1, gpus_per_worker=0)
    evaluation = EvaluationSection(evaluators=1, gpus_per_evaluator=0.0)
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
        evaluation = EvaluationSection(evaluators=1, cpus_per_evaluator=0.5, gpus_per_evaluator=0.0)
        plan_resources(train, evaluation, 2, None, cluster)


@pytest.mark.parametrize(
    ("workers", "gpus_per_worker", "taken"),
    [(1, 1.0, 1.0), (4, 1.0, 4.0), (1, 0.75, 1.0), (4, 0.75, 4.0), (16, 0.5, 8.0), (3, 0.5, 2.0), (2, 0.0, 0.0)],
)
def test_workers_holding_a_fraction_of_a_gpu_take_whole_gpus(workers, gpus_per_worker, taken):
    assert gpus_taken(workers, gpus_per_worker) == taken


@pytest.mark.parametrize(
    ("gpus_per_worker", "gpus_per_evaluator", "cluster_gpus", "at_once"),
    [
        (0.75, 0.125, 1, 1),  # one GPU: the evaluators beside the worker, in the quarter it leaves
        (0.75, 0.125, 8, 2),  # two trials of 4 workers: the evaluators take no trial's place
        (1.0, 0.125, 8, 1),  # whole-GPU workers: the evaluators' quarter costs a trial its place
        (0.75, 0.5, 8, 1),  # an evaluator too large for the quarter a worker leaves takes GPUs of its own
        (0.5, 0.125, 1, 1),  # one worker of a half: the evaluators in the other half
    ],
)
def test_evaluators_that_fit_beside_the_workers_take_no_trial_place(
    gpus_per_worker, gpus_per_evaluator, cluster_gpus, at_once
):
    workers = min(cluster_gpus, 4)
    plan = plan_resources(
        TrainSection(workers=workers, cpus_per_worker=1, gpus_per_worker=gpus_per_worker),
        EvaluationSection(evaluators=2, cpus_per_evaluator=1, gpus_per_evaluator=gpus_per_evaluator),
        8,
        None,
        {"CPU": 64, "GPU": cluster_gpus},
    )
    assert plan.max_concurrent == at_once
    assert plan.trial_gpu_devices == gpus_taken(workers, gpus_per_worker)
    assert plan.trial_gpus == workers * gpus_per_worker


def test_evaluators_beside_a_trial_must_fit_one_gpu_slice():
    # Ray gives a fractional request the smallest free slice that fits, so four evaluators of an
    # eighth all land on one GPU: beside 0.75 workers they leave half a GPU where a worker needs 0.75
    with pytest.raises(InfeasibleResources):
        plan_resources(
            TrainSection(workers=2, cpus_per_worker=1, gpus_per_worker=0.75),
            EvaluationSection(evaluators=4, cpus_per_evaluator=1, gpus_per_evaluator=0.125),
            2,
            None,
            {"CPU": 16, "GPU": 2},
        )


def test_whole_gpu_workers_and_evaluators_of_their_own_do_not_fit_one_gpu():
    with pytest.raises(InfeasibleResources, match=r"0\.25 GPU"):
        plan_resources(
            TrainSection(workers=1, cpus_per_worker=1, gpus_per_worker=1.0),
            EvaluationSection(evaluators=2, cpus_per_evaluator=1, gpus_per_evaluator=0.125),
            2,
            None,
            {"CPU": 16, "GPU": 1},
        )
