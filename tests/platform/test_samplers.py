"""Samplers sized to the search's budget, random and grid search, and what the driver says of them."""

from __future__ import annotations

import itertools

import optuna
import pytest

from platform.spec import Distribution, SpecError, parse_spec
from platform.spec.grid import grid_size, grid_space
from platform.strategies.samplers import (
    make_sampler,
    plan_sampler,
    population_size,
    startup_trials,
)

SPACE = {
    "split_probability": Distribution("uniform", (0.3, 0.7)),
    "temperature": Distribution("loguniform", (0.02, 0.2)),
    "mlm_weight": Distribution("choice", (0.0, 0.1)),
    "bregman_k": Distribution("int", (2, 20)),
}


@pytest.mark.parametrize(
    ("samples", "startup"), [(1, 2), (4, 2), (8, 2), (9, 3), (16, 4), (32, 8), (40, 10), (200, 10)]
)
def test_tpe_start_up_is_a_quarter_of_the_budget_at_least_2_at_most_10(samples, startup):
    assert startup_trials(samples) == startup
    plan = plan_sampler("tpe", samples, concurrent=False)
    assert plan.random_trials == min(samples, startup) and plan.guided_trials == samples - plan.random_trials


def test_the_sampler_object_carries_the_plan():
    sampler = make_sampler(plan_sampler("tpe", 16, concurrent=True), SPACE, seed=3)
    assert isinstance(sampler, optuna.samplers.TPESampler)
    assert sampler._n_startup_trials == 4 and sampler._multivariate
    # constant_liar is said explicitly, whatever the installed Optuna's default
    assert sampler._constant_liar is True
    assert make_sampler(plan_sampler("tpe", 16, concurrent=False), SPACE, 3)._constant_liar is False
    nsga = make_sampler(plan_sampler("nsga2", 24, concurrent=False), SPACE, 0)
    assert isinstance(nsga, optuna.samplers.NSGAIISampler) and nsga._population_size == population_size(24) == 6
    assert isinstance(make_sampler(plan_sampler("random", 4, False), SPACE, 0), optuna.samplers.RandomSampler)


def test_tpe_suggests_from_its_model_after_the_start_up():
    """With the start-up over, TPE concentrates where the objective is high; random search does not."""

    def objective(trial):
        return -((trial.suggest_float("x", 0.0, 1.0) - 0.8) ** 2)

    def mean_late_distance(kind):
        distances = []
        for seed in range(5):
            space = {"x": Distribution("uniform", (0.0, 1.0))}
            study = optuna.create_study(
                direction="maximize", sampler=make_sampler(plan_sampler(kind, 16, False), space, seed)
            )
            study.optimize(objective, n_trials=16)
            distances += [abs(t.params["x"] - 0.8) for t in study.trials[8:]]
        return sum(distances) / len(distances)

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    assert mean_late_distance("tpe") < 0.6 * mean_late_distance("random")


def test_a_budget_with_no_guided_trial_is_named_with_its_fix():
    assert "raise search.samples to at least 3" in plan_sampler("tpe", 2, False).warning()
    assert plan_sampler("tpe", 4, False).warning() is None
    assert "random search" in plan_sampler("nsga2", 4, False).warning()
    assert plan_sampler("random", 2, False).warning() is None


def test_grid_enumerates_every_choice_and_points_per_range():
    grid = grid_space(SPACE, 3)
    assert grid["split_probability"] == pytest.approx([0.3, 0.5, 0.7])
    assert grid["temperature"] == pytest.approx([0.02, 0.02 * 10**0.5, 0.2])  # geometric for loguniform
    assert grid["mlm_weight"] == [0.0, 0.1] and grid["bregman_k"] == [2, 11, 20]
    assert grid_space({"k": Distribution("int", (1, 3))}, 5)["k"] == [1, 2, 3]  # every integer when few
    assert grid_size(SPACE, 3) == 3 * 3 * 2 * 3
    # the grid sampler visits each point once
    space = {k: SPACE[k] for k in ("split_probability", "mlm_weight")}
    study = optuna.create_study(sampler=make_sampler(plan_sampler("grid", 6, False, grid_points=3), space, 0))
    study.optimize(
        lambda t: t.suggest_float("split_probability", 0.3, 0.7) + t.suggest_categorical("mlm_weight", [0.0, 0.1]),
        n_trials=6,
    )
    seen = sorted((round(t.params["split_probability"], 6), t.params["mlm_weight"]) for t in study.trials)
    assert seen == sorted(itertools.product([0.3, 0.5, 0.7], [0.0, 0.1]))


def _spec(search: dict) -> dict:
    return {
        "name": "s",
        "search": {"objective": {"tasks": {"r8-fewshot": 1.0}}, **search},
        "train": {"steps": 4, "eval_every": 2, "workers": 1, "batch_size": 4},
    }


def test_grid_specs_are_checked():
    space = {"split_probability": {"uniform": [0.3, 0.7]}, "mlm_weight": {"choice": [0.0, 0.1]}}
    spec = parse_spec(_spec({"sampler": "grid", "samples": 6, "space": space}), "full")
    assert spec.search.sampler == "grid" and spec.search.grid_points == 3
    with pytest.raises(SpecError, match=r"search.samples \(7\) exceeds the grid's 6 points"):
        parse_spec(_spec({"sampler": "grid", "samples": 7, "space": space}), "full")
    conditional = {
        "recipe": {"choice": ["docsplit", "simcse"]},
        "split_probability": {"uniform": [0.3, 0.7], "when": {"recipe": "docsplit"}},
    }
    with pytest.raises(SpecError, match=r"split_probability\.when: a grid search takes every combination"):
        parse_spec(_spec({"sampler": "grid", "samples": 2, "space": conditional}), "full")
    with pytest.raises(SpecError, match=r"search\.sampler"):
        parse_spec(_spec({"sampler": "bayes", "samples": 2, "space": space}), "full")


def test_trials_a_killed_search_left_running_are_failed_when_the_search_ends(tmp_path):
    from platform.strategies.optuna_base import fail_unfinished_optuna_trials, optuna_storage

    assert fail_unfinished_optuna_trials(tmp_path, "s") == 0  # no study yet
    study = optuna.create_study(study_name="s", storage=optuna_storage(tmp_path), direction="maximize")
    study.tell(study.ask(), 0.5)
    study.ask()  # suggested, never told: what a driver killed at the wrong moment leaves
    assert fail_unfinished_optuna_trials(tmp_path, "s") == 1
    states = [t.state for t in optuna.load_study(study_name="s", storage=optuna_storage(tmp_path)).trials]
    assert states == [optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.FAIL]


def test_grid_refuses_several_objectives_and_warm_starts():
    space = {"mlm_weight": {"choice": [0.0, 0.1]}}
    two = {"objectives": {"q": {"r8-fewshot": 1.0}, "r": {"length-robustness": 1.0}}}
    spec = _spec({"sampler": "grid", "samples": 2, "space": space})
    with pytest.raises(SpecError, match="grid searches one objective"):
        parse_spec({**spec, "search": {**spec["search"], "objective": two}}, "full")
    with pytest.raises(SpecError, match="a warm-start point would take a grid point's place"):
        parse_spec(
            _spec({"sampler": "grid", "samples": 2, "space": space, "warm_start": [{"mlm_weight": 0.1}]}), "full"
        )


def test_nsga2_keeps_a_population_of_at_least_four_at_any_budget():
    for samples in (1, 2, 4):
        plan = plan_sampler("nsga2", samples, False)
        assert plan.random_trials == 4 and plan.guided_trials == 0 and plan.warning()
        assert isinstance(make_sampler(plan, SPACE, 0), optuna.samplers.NSGAIISampler)
