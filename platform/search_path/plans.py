"""A search as the driver runs it, once resolved (``platform.search_path.resolution.resolve`` builds it): the
search's own plan, the training and evaluation plans, the fixed hyperparameters, the resource plan
and the inputs' plan. Past ``resolve`` the driver reads these, never the spec."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from doctune_core.data.corpus import CorpusStats
from evaluators.plan import EvalPlan
from platform.cluster.environment import ROOT, environment
from platform.cluster.resources import ResourcePlan
from platform.search_path.inputs import InputsPlan
from platform.spec import Replacement
from platform.spec.schema import Distribution, TrackerSettings
from platform.strategies import SearchStrategy
from trainers.config import TrainPlan
from trainers.settings import TrialSettings


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

    def with_base(self, model_dir: str, source_model: str) -> ResolvedSearch:
        """The same search once a base it trains (``base:``) exists: only the model paths change (and
        the anchor term's targets, which are the base's embeddings)."""
        from doctune_core.data import PreparedCorpus
        from trainers.anchor_targets import anchor_dir

        anchors = self.train_plan.anchor_targets_path
        if anchors is not None:
            corpus = PreparedCorpus.load(self.train_plan.corpus_path)
            anchors = str(anchor_dir(model_dir, corpus, self.train_plan.max_length))
        train_plan = dataclasses.replace(self.train_plan, base_model=model_dir, anchor_targets_path=anchors)
        return dataclasses.replace(self, train_plan=train_plan, source_model=source_model)

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
