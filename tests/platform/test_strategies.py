"""The search modes (platform.strategies) and Tune's set-up (platform.search_path.tuner.tune_setup) built from a
plan alone: no spec is made or read past platform.search_path.plans.resolve."""

from __future__ import annotations

import dataclasses

import pytest
from ray.tune.schedulers import ASHAScheduler, FIFOScheduler, PopulationBasedTraining
from ray.tune.search import BasicVariantGenerator
from ray.tune.search.optuna import OptunaSearch

from doctune_core.data.corpus import CorpusStats
from evaluators.plan import EvalBudget, EvalPlan
from evaluators.pool import CheckpointScorer
from platform.cluster.resources import ResourcePlan
from platform.search_path.inputs import InputsPlan
from platform.search_path.plans import ResolvedSearch, SearchPlan
from platform.search_path.tuner import tune_setup
from platform.spec import parse_spec
from platform.spec.schema import AshaSpec, CorpusSpec, Distribution, PbtSpec, TrackerSettings
from platform.strategies import SearchStrategy, strategy_for
from platform.strategies.optuna_asha import OptunaAsha
from platform.strategies.optuna_base import OptunaPlan
from platform.strategies.optuna_only import OptunaWithoutEarlyStopping
from platform.strategies.population import Population
from platform.strategies.samplers import plan_sampler
from trainers.config import MlmHeadSettings, TrainPlan
from trainers.settings import TrialSettings

SPACE = {"lr": Distribution("loguniform", (1e-5, 1e-4)), "pooling": Distribution("choice", ("cls", "mean"))}
OPTUNA = OptunaPlan("s", SPACE, plan_sampler("tpe", 8, concurrent=True), seed=3, metrics=("objective",))


def _strategies() -> dict[str, SearchStrategy]:
    return {
        "optuna+asha": OptunaAsha(OPTUNA, AshaSpec(grace_period=2, reduction_factor=3), rounds=4),
        "optuna": OptunaWithoutEarlyStopping(OPTUNA),
        "pbt": Population(PbtSpec(perturbation_interval=2), SPACE, samples=8, seed=3, rounds=4),
    }


def test_each_strategy_gives_tune_its_searcher_scheduler_and_stop_condition(tmp_path):
    parts = {name: strategy.tune_parts(tmp_path) for name, strategy in _strategies().items()}
    searcher, space, asha, stop = parts["optuna+asha"]
    assert isinstance(searcher, OptunaSearch) and space is None and stop is None
    assert isinstance(asha, ASHAScheduler) and (asha._max_t, asha._reduction_factor) == (4, 3)
    assert asha._time_attr == "eval_round" and asha._metric == "objective"
    assert isinstance(parts["optuna"].search_alg, OptunaSearch) and isinstance(parts["optuna"].scheduler, FIFOScheduler)
    generator, space, pbt, stop = parts["pbt"]
    assert isinstance(generator, BasicVariantGenerator) and set(space) == set(SPACE)
    assert isinstance(pbt, PopulationBasedTraining) and stop == {"eval_round": 4}
    assert [s.population for s in _strategies().values()] == [False, False, True]
    assert "multivariate TPE" in _strategies()["optuna"].describe()


def _resolved(strategy: SearchStrategy, run_dir) -> ResolvedSearch:
    """A resolved search put together by hand, as resolve() would, with no spec anywhere."""
    evaluation = EvalPlan({"objective": {"r8-fewshot": 1.0}}, ("evaluator-0",), "doctune-s", EvalBudget(), 128, 8, 1)
    plan = TrainPlan(
        run_uri=str(run_dir),
        base_model="base",
        base_model_name="base",
        corpus_path="corpus",
        corpus_name="news-articles",
        steps=8,
        eval_every=2,
        max_length=128,
        workers=1,
        use_gpu=False,
        cpus_per_worker=1.0,
        gpus_per_worker=0.0,
        threads_per_worker=1,
        seed=0,
        bf16=False,
        max_worker_failures=0,
        scorer=CheckpointScorer(evaluation),
        population=strategy.population,
    )
    search = SearchPlan(
        name="s",
        samples=8,
        space=SPACE,
        strategy=strategy,
        max_trial_failures=2,
        keep_checkpoints="best",
        confirm_seeds=0,
        evaluators=1,
        cpus_per_evaluator=1.0,
        gpus_per_evaluator=0.0,
    )
    inputs = InputsPlan(
        base_model="base",
        base=None,
        corpus=CorpusSpec(),
        longformer=None,
        mlm_head=MlmHeadSettings(),
        may_weight_mlm=False,
        interpolates=False,
        recipes=("docsplit",),
        hard_negatives=False,
        anchor_poolings=(),
        workers=1,
        cpus_per_worker=1.0,
        gpus_per_worker=0.0,
        bf16=False,
        max_worker_failures=0,
        max_length=128,
        seed=0,
    )
    resources = ResourcePlan(
        cluster_cpus=4.0,
        cluster_gpus=0.0,
        trial_cpus=1.01,
        trial_gpus=0.0,
        evaluator_cpus=1.0,
        evaluator_gpus=0.0,
        max_concurrent=2,
        trial_gpu_devices=0.0,
    )
    stats = CorpusStats(10, 30, 0, 0, 0, 0)
    return ResolvedSearch(
        search=search,
        spec_path=run_dir / "s.yaml",
        profile="local",
        run_dir=run_dir,
        train_plan=plan,
        evaluation=evaluation,
        fixed=TrialSettings(),
        resources=resources,
        corpus_stats=stats,
        source_model="base",
        inputs=inputs,
        tracking=TrackerSettings(),
        spec_record={"name": "s"},
    )


@pytest.mark.parametrize("mode", ["optuna+asha", "optuna", "pbt"])
def test_tunes_set_up_is_built_from_the_plan_alone(tmp_path, mode):
    from platform.rundir.retention import ReleaseEndedTrials

    resolved = _resolved(_strategies()[mode], tmp_path)
    assert not any(type(value).__name__ == "SearchSpec" for value in vars(resolved).values())
    param_space, tune_config, run_config = tune_setup(resolved)
    assert (tune_config.num_samples, tune_config.max_concurrent_trials, tune_config.reuse_actors) == (8, 2, False)
    assert type(tune_config.scheduler) is type(resolved.search.strategy.tune_parts(tmp_path).scheduler)
    assert run_config.name == "s" and run_config.storage_path == str(tmp_path / "tune")
    assert run_config.failure_config.max_failures == 2
    released = any(isinstance(callback, ReleaseEndedTrials) for callback in run_config.callbacks)
    assert released == (mode != "pbt")  # under PBT a trial may go on from any round until the end
    assert (param_space is None) == (mode != "pbt") and (run_config.stop is None) == (mode != "pbt")


def _search_section(**search):
    raw = {
        "name": "t",
        "search": {"objective": {"tasks": {"r8-fewshot": 1.0}}, "space": {"lr": {"uniform": [0.1, 0.2]}}},
    }
    raw["search"].update(search)
    return parse_spec(raw, "local").search


@pytest.mark.parametrize(
    ("search", "metrics", "rounds", "made"),
    [
        ({}, ("objective",), 4, OptunaAsha),
        ({}, ("objective",), 1, OptunaWithoutEarlyStopping),  # one round: nothing to stop at
        ({"scheduler": {"asha": None}}, ("objective",), 4, OptunaWithoutEarlyStopping),
        ({}, ("quality", "length"), 4, OptunaWithoutEarlyStopping),  # ASHA stops on one scalar
        ({"scheduler": {"pbt": {}}}, ("objective",), 4, Population),
    ],
)
def test_the_spec_decides_the_mode_once(search, metrics, rounds, made):
    strategy = strategy_for("t", _search_section(**search), metrics, rounds, concurrent=False)
    assert type(strategy) is made
    if len(metrics) > 1:
        assert strategy.optuna.sampler.kind == "nsga2" and strategy.optuna.metrics == metrics
    if made is OptunaAsha:
        assert dataclasses.asdict(strategy.asha) == {"grace_period": 1, "reduction_factor": 2}


def test_a_search_that_may_interpolate_positions_scores_that_start_untrained(minilm_dir, tmp_path):
    """The baseline rows: the base as given, converted, and (where some trial starts interpolated)
    converted with interpolated positions, each untrained: a gain from training is read against
    the untrained model with the trial's own start."""
    from transformers import AutoConfig

    from doctune_core.longformer import cached_longformer
    from doctune_core.position_interpolation import CONFIG_KEY
    from platform.results.baselines import baseline_models

    converted = str(cached_longformer(minilm_dir, 1024, 64, tmp_path / "cache"))
    resolved = _resolved(_strategies()["optuna"], tmp_path)
    resolved = dataclasses.replace(
        resolved, source_model=minilm_dir, train_plan=dataclasses.replace(resolved.train_plan, base_model=converted)
    )
    assert list(baseline_models(resolved)) == ["baseline", "baseline-converted"]
    interpolating = dataclasses.replace(resolved, inputs=dataclasses.replace(resolved.inputs, interpolates=True))
    rows = baseline_models(interpolating)
    assert list(rows) == ["baseline", "baseline-converted", "baseline-interpolated"]
    assert getattr(AutoConfig.from_pretrained(rows["baseline-interpolated"][0]), CONFIG_KEY) == 2
