"""The ASHA replica (``bench.efficiency.asha``) against Ray Tune's own ``ASHAScheduler``: every
stop/continue decision the replay takes is the one Ray's scheduler takes on the same results, on the
checked-in table for 50 seeds and on synthetic tables with failures, ties and other rung layouts. A
Ray upgrade that changes ASHA's decisions fails here instead of drifting silently from the replay."""

from __future__ import annotations

import numpy as np
import pytest
from ray.tune.experiment import Trial
from ray.tune.schedulers import TrialScheduler

from bench.efficiency import METHODS, Replay, Table, load_table, replay_order
from platform.strategies.optuna_asha import OptunaAsha
from tests.bench.tables import REPLAYED, write_table

Decision = tuple[int, int, str]  # (trial, round, Ray's decision)


def replica_decisions(run: Replay) -> list[Decision]:
    """The decisions a replay took: each trial continued after every round it ran but its last."""
    return [
        (trial, round_, TrialScheduler.STOP if round_ == rounds else TrialScheduler.CONTINUE)
        for trial, rounds in enumerate(run.rounds)
        for round_ in range(1, rounds + 1)
    ]


def ray_decisions(table: Table, configs: list[int]) -> list[Decision]:
    """The configurations run in turn under the ``ASHAScheduler`` a search builds
    (``platform.strategies.optuna_asha``), called as Tune's controller calls it: ``on_trial_add``
    when a trial starts, ``on_trial_result`` on every round's report, ``on_trial_complete`` with the
    last result once a trial is stopped. ASHA never reads the controller argument, so none is started."""
    scheduler = OptunaAsha(None, table.asha, table.rounds).scheduler()
    decisions = []
    for index, config in enumerate(configs):
        # stub: a Trial without a registered trainable, which would need Ray's registry
        trial = Trial("replay", config={"config": config}, trial_id=f"{index:05d}", stub=True)
        scheduler.on_trial_add(None, trial)
        for round_ in range(1, table.rounds + 1):
            result = {"eval_round": round_, "objective": float(table.val[config, round_ - 1])}
            decision = scheduler.on_trial_result(None, trial, result)
            decisions.append((index, round_, decision))
            if decision == TrialScheduler.STOP:
                scheduler.on_trial_complete(None, trial, result)
                break
    return decisions


@pytest.mark.parametrize("path", REPLAYED, ids=lambda path: path.stem)
@pytest.mark.parametrize("method", ["random_asha", "tpe_asha"])
def test_the_replica_decides_as_rays_scheduler_on_the_checked_in_tables(method, path):
    table = load_table(path)
    rounds_run = set()
    for seed in range(50):
        run = METHODS[method](table, seed, 32)
        assert replica_decisions(run) == ray_decisions(table, run.configs), f"{method}, seed {seed}"
        rounds_run.update(run.rounds)
    # trials stopped at the first rung, at a later one, and run to the end: every branch taken
    assert {1, table.rounds} < rounds_run


def noisy(point: dict, round_: int) -> tuple[float | None, float | None]:
    """Objectives on a coarse scale (many ties), with every point of a = 0 failed (empty cells)."""
    if point["a"] == 0:
        return None, None
    value = round(float(np.random.default_rng([point["a"], point["b"], round_]).uniform()), 1)
    return value, value


@pytest.mark.filterwarnings("ignore:All-NaN slice:RuntimeWarning")  # Ray's cutoff of a rung of failures only
@pytest.mark.parametrize(("grace_period", "reduction_factor", "rounds"), [(1, 2, 4), (1, 3, 9), (2, 2, 8)])
def test_the_replica_decides_as_rays_scheduler_with_failures_and_ties(tmp_path, grace_period, reduction_factor, rounds):
    space = {"a": {"int": [0, 1, 2, 3]}, "b": {"int": [0, 1, 2, 3, 4]}}
    table = load_table(write_table(tmp_path, "noisy", space, rounds, 1, noisy, asha=(grace_period, reduction_factor)))
    assert np.isnan(table.val).any()
    rounds_run = set()
    for seed in range(20):
        order = [int(c) for c in np.random.default_rng(seed).permutation(len(table.configs))]
        run = replay_order(table, order, asha=True)
        assert replica_decisions(run) == ray_decisions(table, order), f"seed {seed}"
        rounds_run.update(run.rounds)
    assert len(rounds_run) > 2  # stops at more than one rung, and runs to the end
