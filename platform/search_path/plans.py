"""A search as the driver runs it, once resolved (``resolve`` builds it from the settled spec, its
prepared inputs and the cluster): the search's own plan, the training and evaluation plans, the fixed
hyperparameters, the resource plan and the inputs' plan. Past ``resolve`` the driver reads these,
never the spec."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path

from doctune_core.data.corpus import CorpusStats
from doctune_core.data.neighbours import neighbours_dir
from doctune_core.data.wheels import cache_dir
from evaluators.plan import EvalPlan
from evaluators.pool import CheckpointScorer
from platform.cluster.environment import ROOT, environment
from platform.cluster.resources import ResourcePlan
from platform.search_path.inputs import InputsPlan, PreparedInputs
from platform.search_path.settling import Settled, plan_search_resources
from platform.spec import Replacement, SearchSpec
from platform.spec.schema import Distribution, TrackerSettings
from platform.strategies import SearchStrategy, strategy_for
from trainers.anchor_targets import anchor_dir
from trainers.config import TrainPlan
from trainers.settings import TrialSettings

ACTOR_PREFIX = "evaluator"


@dataclass(frozen=True, kw_only=True)
class SearchPlan:
    """The search's own part of the plan, what the driver reads of it after ``resolve``: the
    strategy that draws and stops the trials (``platform.strategies``), the searched space, and
    what a search does around its trials."""

    name: str
    samples: int
    space: dict[str, Distribution]  # the searched dimensions (a winner's configuration is their values)
    strategy: SearchStrategy
    max_trial_failures: int  # Tune's retries of a trial that failed (it goes on from its last checkpoint)
    keep_checkpoints: str  # what an ended trial keeps (platform.rundir.retention)
    confirm_seeds: int  # the winner retrained with this many more training seeds
    evaluators: int
    cpus_per_evaluator: float
    gpus_per_evaluator: float


@dataclass(frozen=True, kw_only=True)
class ResolvedSearch:
    """Everything a search needs, built once (``resolve``): the search's, training and evaluation
    plans, the fixed hyperparameters, the resource plan and the inputs' plan. Past ``resolve`` the
    driver reads these, never the spec; ``spec_record`` is the spec as resolved, for the records
    (``search.json``, the trackers)."""

    search: SearchPlan
    spec_path: Path
    profile: str
    run_dir: Path
    train_plan: TrainPlan
    evaluation: EvalPlan
    fixed: TrialSettings
    resources: ResourcePlan
    corpus_stats: CorpusStats
    source_model: str  # the base encoder before any backbone conversion (train_plan.base_model is after it)
    inputs: InputsPlan
    tracking: TrackerSettings
    spec_record: dict
    replaced: tuple[Replacement, ...] = ()  # what the profile's built-in overrides changed in the spec
    fit: str | None = None  # how train.workers: auto was fitted to the cluster
    growth: str | None = None  # what an autoscaler may add that the plan counted (platform.cluster.autoscaling)
    storage: str | None = None  # the URI the run is kept at (``--storage``, platform/rundir/storage.py)

    def stored_at(self, uri: str) -> ResolvedSearch:
        """The same search with its trials and Tune's records at the storage ``uri``."""
        return dataclasses.replace(self, storage=uri, train_plan=dataclasses.replace(self.train_plan, run_uri=uri))

    def with_base(self, inputs: PreparedInputs) -> ResolvedSearch:
        """The same search once a base it trains (``base:``) exists: only the model paths change (and
        the anchor term's targets, which are the base's embeddings)."""
        anchors = self.train_plan.anchor_targets_path
        if anchors is not None:
            anchors = str(anchor_dir(inputs.model_dir, inputs.corpus, self.train_plan.max_length))
        train_plan = dataclasses.replace(self.train_plan, base_model=inputs.model_dir, anchor_targets_path=anchors)
        return dataclasses.replace(self, train_plan=train_plan, source_model=inputs.source_model)

    def summary(self) -> dict:
        """What ``--dry-run`` prints and ``search.json`` records."""
        return {
            "spec": str(self.spec_path),
            "profile": self.profile,
            "run_dir": str(self.run_dir),
            "storage": self.storage,
            "run_files": self.train_plan.run_uri,  # where the trials and Tune write (the storage, else the run dir)
            "resolved_spec": self.spec_record,
            "profile_replaced": [dataclasses.asdict(r) for r in self.replaced],
            "fit": self.fit,
            "cluster_growth": self.growth,
            "fixed_hyperparameters": dataclasses.asdict(self.fixed),
            "searched": {k: {d.kind: list(d.values)} for k, d in self.search.space.items()},
            "corpus": dataclasses.asdict(self.corpus_stats),
            "prepared_corpus": self.train_plan.corpus_path,  # the Parquet shards every Train worker reads
            "mined_neighbours": self.train_plan.neighbours_path,  # its BM25 neighbours (trials take hard negatives)
            "anchor_targets": self.train_plan.anchor_targets_path,  # where trials weight the anchor term
            "resources": dataclasses.asdict(self.resources),
            "environment": environment(ROOT),
            "trial_plan": {
                "trials": self.search.samples,
                "steps": self.train_plan.steps,
                "eval_rounds": self.train_plan.eval_rounds,
                "workers_per_trial": self.train_plan.workers,
                "max_concurrent": self.resources.max_concurrent,
            },
        }


def _report_tasks(spec: SearchSpec) -> tuple[str, ...]:
    """The spec's report-only tasks that no objective uses, then, where a round scores the longest
    haystacks only (``evaluation.limits.haystacks: longest``), the length grid of every objective
    task that has one (``evaluators.tasks.grid_task``): scored once, at the end."""
    from evaluators.tasks import grid_task, task_class

    objective = [task for weights in spec.search.objective.named().values() for task in weights]
    tasks = [t for t in spec.evaluation.report_tasks if t not in objective]
    if spec.evaluation.limits.haystacks == "longest":
        tasks += [grid_task(t) for t in objective if task_class(t).length_grid]
    return tuple(dict.fromkeys(tasks))


def evaluation_plan(spec: SearchSpec) -> EvalPlan:
    """What ``spec``'s evaluators score, on which items, and how: the same plan gives the same
    items (and the same embedding cache keys) in any process."""
    evaluation = spec.evaluation
    return EvalPlan(
        objectives=spec.search.objective.named(),
        actor_names=tuple(f"{ACTOR_PREFIX}-{i}" for i in range(evaluation.evaluators)),
        namespace=f"doctune-{spec.name}",
        budget=evaluation.limits,
        max_length=evaluation.max_length,
        batch_size=evaluation.batch_size,
        threads=evaluation.threads,
        report_tasks=_report_tasks(spec),
        shared_embeddings=str(cache_dir() / "embeddings"),
        references=evaluation.references,
        parts=("val", "test") if evaluation.locked_part else ("val",),
        bf16=evaluation.bf16,
    )


def resolve(
    settled: Settled,
    inputs: PreparedInputs,
    *,
    spec_path: Path,
    run_dir: Path,
    cluster: dict[str, float],
    growth: str | None = None,
) -> ResolvedSearch:
    """The search ``settled`` on ``cluster`` (``growth``: what its autoscaler may add, counted)
    makes with its prepared ``inputs``, in ``run_dir``: every plan the driver, the trials and the
    evaluators read from here on."""
    spec, model_dir, corpus = settled.spec, inputs.model_dir, inputs.corpus
    train, evaluation = spec.train, spec.evaluation
    resources = plan_search_resources(spec, cluster)
    eval_plan = evaluation_plan(spec)
    plan = TrainPlan(
        run_uri=str(run_dir.resolve()),
        base_model=model_dir,
        base_model_name=spec.base_model,
        corpus_path=str(corpus.directory),
        neighbours_path=str(neighbours_dir(corpus)) if spec.may_take_hard_negatives() else None,
        anchor_targets_path=str(anchor_dir(model_dir, corpus, train.max_length)) if spec.may_anchor() else None,
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
        # a round reads validation only: the locked test part is read once the search has chosen,
        # for the rows it reports (platform.results.winner.read_locked_part)
        scorer=CheckpointScorer(dataclasses.replace(eval_plan, parts=("val",))),
        gradient_checkpointing=train.gradient_checkpointing,
        chunk_size=train.chunk_size,
        overlap_scoring=train.overlap_scoring,
    )
    search = spec.search
    strategy = strategy_for(
        spec.name, search, eval_plan.objective_metrics, plan.eval_rounds, resources.max_concurrent > 1
    )
    # under PBT every round's checkpoint keeps its training state: another trial may go on from it
    plan = dataclasses.replace(plan, population=strategy.population)
    search_plan = SearchPlan(
        name=spec.name,
        samples=search.samples,
        space=search.space,
        strategy=strategy,
        max_trial_failures=train.max_trial_failures,
        keep_checkpoints=train.keep_checkpoints,
        confirm_seeds=search.confirm_seeds,
        evaluators=evaluation.evaluators,
        cpus_per_evaluator=evaluation.cpus_per_evaluator,
        gpus_per_evaluator=evaluation.gpus_per_evaluator,
    )
    return ResolvedSearch(
        search=search_plan,
        spec_path=spec_path,
        profile=settled.profile,
        run_dir=run_dir,
        train_plan=plan,
        evaluation=eval_plan,
        fixed=spec.fixed_hyperparameters(),
        resources=resources,
        corpus_stats=corpus.stats,
        source_model=inputs.source_model,
        inputs=InputsPlan.of(spec),
        tracking=spec.tracking,
        spec_record=dataclasses.asdict(spec),
        replaced=settled.replaced,
        fit=settled.fit,
        growth=growth,
    )
