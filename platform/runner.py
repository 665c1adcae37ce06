"""The Tune wiring: from a validated spec to finished trials.

``resolve`` turns a spec into everything a search needs (model directory, prepared corpus,
resource plan, the fixed ``TrainPlan``); ``run_search`` starts the evaluator pool, scores the
base model, and runs Optuna + ASHA over Ray Train trials.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path

from platform.resources import ResourcePlan, plan_resources
from platform.spec import Distribution, SearchSpec
from platform.timings import PhaseClock
from trainers.config import EvalPlan, Hyperparameters, TrainPlan
from trainers.data.corpus import CorpusStats

ACTOR_PREFIX = "evaluator"


@dataclass(frozen=True)
class ResolvedSearch:
    spec: SearchSpec
    spec_path: Path
    profile: str
    run_dir: Path
    plan: TrainPlan
    fixed: Hyperparameters
    resources: ResourcePlan
    corpus_stats: CorpusStats

    def summary(self) -> dict:
        return {
            "spec": str(self.spec_path),
            "profile": self.profile,
            "run_dir": str(self.run_dir),
            "resolved_spec": dataclasses.asdict(self.spec),
            "fixed_hyperparameters": dataclasses.asdict(self.fixed),
            "searched": {k: {d.kind: list(d.values)} for k, d in self.spec.search.space.items()},
            "corpus": dataclasses.asdict(self.corpus_stats),
            "resources": dataclasses.asdict(self.resources),
            "trial_plan": {
                "trials": self.spec.search.samples,
                "steps": self.plan.steps,
                "eval_rounds": self.plan.eval_rounds,
                "workers_per_trial": self.plan.workers,
                "max_concurrent": self.resources.max_concurrent,
            },
        }


def resolve(
    spec: SearchSpec,
    spec_path: Path,
    profile: str,
    run_dir: Path,
    model_dir: str,
    corpus: tuple[Path, CorpusStats],
    cluster: dict[str, float],
) -> ResolvedSearch:
    train, evaluation = spec.train, spec.evaluation
    resources = plan_resources(train, evaluation, spec.search.samples, spec.search.max_concurrent, cluster)
    namespace = f"doctune-{spec.name}"
    eval_plan = EvalPlan(
        objectives=spec.search.objective.named(),
        actor_names=tuple(f"{ACTOR_PREFIX}-{i}" for i in range(evaluation.evaluators)),
        namespace=namespace,
        budget=evaluation.limits,
        max_length=evaluation.max_length,
        batch_size=evaluation.batch_size,
        threads=evaluation.threads,
        report_tasks=tuple(
            t for t in evaluation.report_tasks if not any(t in w for w in spec.search.objective.named().values())
        ),
    )
    plan = TrainPlan(
        run_dir=str(run_dir.resolve()),
        base_model=model_dir,
        base_model_name=spec.base_model,
        corpus_path=str(corpus[0]),
        corpus_name=spec.corpus.source,
        steps=train.steps,
        eval_every=train.eval_every,
        max_length=train.max_length,
        workers=train.workers,
        use_gpu=train.gpus_per_worker > 0,
        cpus_per_worker=train.cpus_per_worker,
        gpus_per_worker=train.gpus_per_worker,
        threads_per_worker=max(1, math.floor(train.cpus_per_worker)),
        seed=train.seed,
        bf16=train.bf16,
        max_worker_failures=train.max_worker_failures,
        evaluation=eval_plan,
        gradient_checkpointing=train.gradient_checkpointing,
        chunk_size=train.chunk_size,
        fault_nan_at_step=train.fault_nan_at_step,
    )
    return ResolvedSearch(spec, spec_path, profile, run_dir, plan, spec.fixed_hyperparameters(), resources, corpus[1])


class ConditionalSpace:
    """Optuna define-by-run search space: dimensions in spec order, each sampled only when its
    ``when`` condition holds for the values drawn before it (so a recipe's parameters are drawn
    only in trials of that recipe). A class, not a closure, so Tune can save it with the search."""

    def __init__(self, space: dict[str, Distribution]) -> None:
        self.space = space

    def __call__(self, trial) -> None:
        chosen: dict = {}
        for name, dist in self.space.items():
            if not dist.applies(chosen):
                continue
            if dist.kind == "choice":
                chosen[name] = trial.suggest_categorical(name, list(dist.values))
            elif dist.kind == "int":
                chosen[name] = trial.suggest_int(name, *dist.values)
            else:
                chosen[name] = trial.suggest_float(name, *dist.values, log=dist.kind == "loguniform")


def _tuner(resolved: ResolvedSearch, resume: bool):
    import optuna
    from ray import tune
    from ray.tune.schedulers import ASHAScheduler, FIFOScheduler
    from ray.tune.search.optuna import OptunaSearch

    from trainers.trial import run_trial

    spec = resolved.spec
    trainable = tune.with_resources(
        tune.with_parameters(run_trial, plan=resolved.plan, fixed=dataclasses.asdict(resolved.fixed)),
        {"cpu": 0.01},
    )
    experiment = resolved.run_dir / "tune" / spec.name
    if resume and (experiment / "tuner.pkl").exists():
        return tune.Tuner.restore(
            str(experiment.resolve()), trainable=trainable, resume_unfinished=True, resume_errored=True
        )
    evaluation = resolved.plan.evaluation
    metrics = list(evaluation.objective_metrics)
    search_alg = None
    if spec.search.space:
        if evaluation.multi_objective:
            sampler = optuna.samplers.NSGAIISampler(seed=spec.search.seed)
        elif spec.search.sampler == "tpe":
            sampler = optuna.samplers.TPESampler(seed=spec.search.seed)
        else:
            sampler = optuna.samplers.RandomSampler(seed=spec.search.seed)
        search_alg = OptunaSearch(
            space=ConditionalSpace(spec.search.space),
            metric=metrics if evaluation.multi_objective else metrics[0],
            mode=["max"] * len(metrics) if evaluation.multi_objective else "max",
            sampler=sampler,
            points_to_evaluate=[dict(point) for point in spec.search.warm_start] or None,
            study_name=spec.name,
            storage=study_storage(resolved.run_dir),
        )
    asha = spec.search.scheduler.asha
    # ASHA stops on one scalar; with several objectives a trial behind on the first may be on the front
    scheduler = (
        ASHAScheduler(
            time_attr="eval_round",
            metric="objective",
            mode="max",
            max_t=resolved.plan.eval_rounds,
            grace_period=asha.grace_period,
            reduction_factor=asha.reduction_factor,
        )
        if asha is not None and resolved.plan.eval_rounds > 1 and not evaluation.multi_objective
        else FIFOScheduler()
    )
    return tune.Tuner(
        trainable,
        tune_config=tune.TuneConfig(
            search_alg=search_alg,
            scheduler=scheduler,
            num_samples=spec.search.samples,
            max_concurrent_trials=resolved.resources.max_concurrent,
            # Not reused, on purpose: reuse saved ~5 s per trial but hung a local search (a trial run
            # in a reused actor trained to the end and its reports never reached Tune); RESULTS.md
            reuse_actors=False,
        ),
        run_config=tune.RunConfig(
            name=spec.name,
            storage_path=str((resolved.run_dir / "tune").resolve()),
            failure_config=tune.FailureConfig(max_failures=0),
        ),
    )


STUDY_FILE = "optuna.journal"


def study_storage(run_dir: Path):
    """The Optuna study's storage: a journal file in the run dir (``optuna-dashboard RUN_DIR/optuna.journal``)."""
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    return JournalStorage(JournalFileBackend(str((run_dir / STUDY_FILE).resolve())))


def score_baseline(resolved: ResolvedSearch) -> dict[str, dict[str, float]]:
    from evaluators.pool import score_checkpoint

    evaluation = resolved.plan.evaluation
    return score_checkpoint(
        evaluation, resolved.plan.base_model, resolved.fixed.pooling, [*evaluation.tasks, *evaluation.report_tasks]
    )


def start_evaluators(resolved: ResolvedSearch) -> list:
    """The evaluator actors. Named actors die with their last handle: keep the list until the end."""
    from evaluators.pool import start_pool

    evaluation = resolved.spec.evaluation
    print(f"doctune: starting {evaluation.evaluators} evaluator(s) (loading task data)", flush=True)
    return start_pool(
        resolved.plan.evaluation, resolved.plan.run_dir, evaluation.cpus_per_evaluator, evaluation.gpus_per_evaluator
    )


def run_search(resolved: ResolvedSearch, resume: bool, clock: PhaseClock | None = None):
    """Score the base model, then run the trials. Returns (baseline scores, Tune results)."""
    clock = clock or PhaseClock()
    baseline_file = resolved.run_dir / "baseline.json"
    if baseline_file.exists():
        baseline = json.loads(baseline_file.read_text())
    else:
        print("doctune: scoring the base model (the leaderboard's baseline row)", flush=True)
        with clock.phase("baseline"):
            baseline = score_baseline(resolved)
        baseline_file.write_text(json.dumps(baseline, indent=2))
    print(f"doctune: {resolved.spec.search.samples} trial(s), {resolved.resources.describe()}", flush=True)
    with clock.phase("trials"):
        results = _tuner(resolved, resume).fit()
    return baseline, results
