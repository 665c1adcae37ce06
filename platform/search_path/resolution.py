"""One search, resolved once: the spec for the chosen profile, the cluster it runs on, its inputs.

``python -m platform.search`` resolves a search in this order, each step once:

1. ``SearchRequest``: the spec file read (not yet validated for a profile), the run directory
   checked, and for ``--resume`` what the run directory recorded (``search.json``);
2. ``choose_profile``: ``--profile`` as given, else the profile a resumed run was started with,
   else ``full`` when the cluster has GPUs and ``local`` when it has none;
3. ``SearchRequest.spec_for``: the spec validated for that profile, and for ``--resume`` checked
   against the recorded one (``check_matches_recording``);
4. ``fit_to_cluster``: ``train.workers: auto`` made a count, one worker per GPU of the largest
   node that splits the global batch evenly, ``evaluation.gpus_per_evaluator: auto`` a share of
   a GPU where the cluster has one, and ``evaluation.cpus_per_evaluator: auto`` what one trial
   leaves of the cluster's CPUs (a resumed search keeps what it started with);
5. ``resolve``: with the prepared inputs (base encoder, corpus) and the cluster's resources, the
   ``ResolvedSearch`` (``platform.search_path.plans``) that ``--dry-run`` prints, ``search.json`` records and
   the search runs; past it nothing reads the spec.

``settle`` runs steps 2-4 for a cluster and says what it chose.

A search that starts its own local Ray knows its cluster (this machine) before Ray starts, so
steps 2-4 and the resource check run before anything is started; a search that joins a running
cluster reads the cluster once connected.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from doctune_core.data.corpus import PreparedCorpus
from doctune_core.data.neighbours import neighbours_dir
from doctune_core.data.wheels import cache_dir
from doctune_core.run_layout import SEARCH_RECORD
from evaluators.plan import EvalPlan
from evaluators.pool import CheckpointScorer
from platform.cluster.resources import (
    EVALUATOR_CPUS_CAP,
    EVALUATOR_GPU_SHARE,
    EVALUATORS_GPU_CAP,
    LARGEST_NODE_GPUS,
    TRIAL_CPU,
    ResourcePlan,
    auto_evaluator_cpus,
    auto_workers,
    plan_resources,
)
from platform.exit_codes import UsageError
from platform.rundir.layout import check_run_dir
from platform.rundir.storage import RunStorage, copied_by_an_earlier_doctune, refuse_earlier_copy
from platform.search_path.inputs import InputsPlan
from platform.search_path.plans import ResolvedSearch, SearchPlan
from platform.spec import Replacement, SearchSpec, find_spec_file, parse_profiles, profile_replacements, read_raw
from platform.spec.checks import check_semantics, losses_of, values_of
from platform.spec.convert import plugin_registries
from platform.strategies import strategy_for
from trainers.anchor_targets import anchor_dir
from trainers.config import TrainPlan

log = logging.getLogger(f"doctune.{__name__}")

ACTOR_PREFIX = "evaluator"


def _jsonable(value) -> object:
    """``value`` as it reads back from JSON (what ``search.json`` holds)."""
    return json.loads(json.dumps(value, default=str))


@dataclass(frozen=True)
class SearchRequest:
    """What the command line asks for: a spec file (read, validated per profile on demand), a run
    directory (checked), ``--profile`` and, for ``--resume``, the run's own record."""

    spec_path: Path
    raw: dict
    profiles: dict[str, SearchSpec]  # the spec validated under every profile, parsed once (``parse_profiles``)
    run_dir: Path
    asked_profile: str | None
    recorded: dict | None  # search.json of the run being resumed
    storage: RunStorage | None = None  # where the run is kept (``--storage``, or where the resumed run was)

    @classmethod
    def from_command_line(
        cls,
        spec: str,
        profile: str | None,
        run_dir: Path | None,
        resume: bool,
        storage_uri: str | None = None,
        resume_if_started: bool = False,
        validation_only: bool = False,
    ) -> SearchRequest:
        """``resume_if_started``: resume when the run directory (or the storage) holds a search, else
        start one: the command a scheduler retries as it is (a RayJob's ``backoffLimit``, a requeued
        Slurm job). ``validation_only``: no locked test part read (``evaluation.locked_part`` false)."""
        spec_path = find_spec_file(spec)
        raw = read_raw(spec_path)
        profiles = parse_profiles(raw)  # the spec itself and every profile's overrides, validated once
        if validation_only:
            profiles = {name: validation_only_spec(spec) for name, spec in profiles.items()}
        name = profiles[profile or "local"].name
        run_dir = run_dir or Path.cwd() / "runs" / name
        storage = RunStorage.open(storage_uri) if storage_uri else None
        if resume_if_started:
            resume = (run_dir / SEARCH_RECORD).exists() or (storage is not None and storage.holds_run())
        if storage and resume and not (run_dir / SEARCH_RECORD).exists():
            # the spec is checked against the storage's record before the driver's records are fetched
            def check(found: dict) -> SearchSpec:
                return cls(spec_path, raw, profiles, run_dir, profile, found).provisional_spec()

            fetch_run(storage, run_dir, check)
        check_run_dir(run_dir, resume)
        recorded = json.loads((run_dir / SEARCH_RECORD).read_text()) if resume else None
        if recorded and copied_by_an_earlier_doctune(recorded):
            if storage:
                raise refuse_earlier_copy(f"--storage {storage.uri}", recorded)
            log.info(
                f"doctune: note: {run_dir} was copied to {recorded['storage']} by an earlier doctune; it goes on "
                "here alone, and that copy is no longer updated",
            )
        elif recorded:
            storage = _storage_of(recorded, storage, run_dir)
        if storage:
            storage.check_holds(run_dir, resume)
        return cls(spec_path, raw, profiles, run_dir, profile, recorded, storage)

    @property
    def resume(self) -> bool:
        return self.recorded is not None

    def provisional_spec(self) -> SearchSpec:
        """The spec for the profile known before the cluster is: enough for its address and inputs.
        A resumed search knows its profile already, so a changed spec is refused here, before Ray."""
        if self.resume:
            return self.spec_for(self.asked_profile or self.recorded_profile)
        return self.profiles[self.asked_profile or "local"]

    @property
    def recorded_profile(self) -> str | None:
        return self.recorded["profile"] if self.recorded else None

    def replacements(self, profile: str) -> list[Replacement]:
        """The values this spec sets that ``profile``'s built-in overrides replace."""
        return profile_replacements(self.raw, profile)

    def spec_for(self, profile: str) -> SearchSpec:
        spec = self.profiles[profile]
        if self.recorded is not None:
            spec = check_matches_recording(spec, self.recorded, self.run_dir)
        return spec


def _storage_of(recorded: dict, asked: RunStorage | None, run_dir: Path) -> RunStorage | None:
    """A resumed run's storage: the one it was started with (its trials are there), which ``--storage``
    may name again but not change (``UsageError``)."""
    kept = recorded.get("storage")
    if asked is not None and asked.uri != kept:
        where, how = (kept, f"with --storage {kept}, or without --storage") if kept else (run_dir, "without --storage")
        raise UsageError(
            f"--storage {asked.uri}: this run keeps its trials and Tune's records in {where}, where its search "
            f"started; resume it {how}"
        )
    if asked is not None or not kept:
        return asked
    try:
        return RunStorage.open(kept)
    except UsageError as err:
        raise UsageError(f"{err} (the storage {run_dir}/{SEARCH_RECORD} records, which holds its trials)") from None


def fetch_run(storage: RunStorage, run_dir: Path, check: Callable[[dict], object]) -> None:
    """For ``--resume --storage URI`` on a machine without the run: the driver's records into ``run_dir``, once
    ``check`` accepted the storage's ``search.json`` (it raises otherwise). Fetched beside ``run_dir``
    and renamed when whole, so an interrupted fetch leaves no run directory behind."""
    if not storage.holds_run():
        raise UsageError(
            f"--resume: neither {run_dir} nor {storage.uri} holds a search (no {SEARCH_RECORD}); "
            "check both, or drop --resume to start one"
        )
    if run_dir.exists() and any(run_dir.iterdir()):
        raise UsageError(f"--resume: {run_dir} is not a run directory, and not empty: name another --run-dir")
    recorded = json.loads(storage.read(SEARCH_RECORD))
    if copied_by_an_earlier_doctune(recorded):
        raise refuse_earlier_copy(f"--resume --storage {storage.uri}", recorded)
    check(recorded)
    fetching = run_dir.with_name(f".{run_dir.name}.fetching")
    shutil.rmtree(fetching, ignore_errors=True)
    try:
        files = storage.pull_driver_records(fetching)
    except OSError as err:
        shutil.rmtree(fetching, ignore_errors=True)
        raise UsageError(
            f"--resume: fetching the run from {storage.uri} failed ({str(err).splitlines()[0]}); nothing was "
            "kept: run the command again"
        ) from None
    if run_dir.exists():
        run_dir.rmdir()
    fetching.rename(run_dir)
    log.info(f"doctune: fetched the run's records from {storage.uri} into {run_dir} ({files} files)")


def validation_only_spec(spec: SearchSpec) -> SearchSpec:
    """``spec`` reading no locked test part (``--validation-only``)."""
    return dataclasses.replace(spec, evaluation=dataclasses.replace(spec.evaluation, locked_part=False))


def check_matches_recording(spec: SearchSpec, recorded: dict, run_dir: Path) -> SearchSpec:
    """``spec`` as the run in ``run_dir`` was started with it (``UsageError`` when it differs). A
    resumed search keeps what its ``auto`` resources were fitted to: the worker count (its
    checkpoints hold one stream position per worker), the evaluators' GPUs and the workers' share;
    and a search started with ``--validation-only`` stays so without the option repeated."""
    started = recorded["resolved_spec"]
    if not started.get("evaluation", {}).get("locked_part", True):
        spec = validation_only_spec(spec)
    if spec.train.workers == "auto":
        spec = dataclasses.replace(spec, train=dataclasses.replace(spec.train, workers=started["train"]["workers"]))
    if spec.evaluation.gpus_per_evaluator == "auto":
        share, worker_share = started["evaluation"]["gpus_per_evaluator"], started["train"]["gpus_per_worker"]
        train = spec.train
        if train.gpus_per_worker == 1 and math.isclose(worker_share, 1 - spec.evaluation.evaluators * share):
            train = dataclasses.replace(train, gpus_per_worker=worker_share)  # what the fit gave the workers
        spec = dataclasses.replace(
            spec, train=train, evaluation=dataclasses.replace(spec.evaluation, gpus_per_evaluator=share)
        )
    if spec.evaluation.cpus_per_evaluator == "auto":
        cpus, threads = started["evaluation"]["cpus_per_evaluator"], started["evaluation"]["threads"]
        evaluation = dataclasses.replace(spec.evaluation, cpus_per_evaluator=cpus, threads=threads)
        spec = dataclasses.replace(spec, evaluation=evaluation)
    if recorded["resolved_spec"] != _jsonable(dataclasses.asdict(spec)):
        raise UsageError(
            f"--resume: the spec or profile differs from the one {run_dir} was started with "
            f"({recorded['spec']}, profile {recorded['profile']!r})"
        )
    return spec


def choose_profile(request: SearchRequest, cluster: dict[str, float]) -> tuple[str, str | None]:
    """The profile and, when doctune chose it, why (printed): ``--profile``, else the profile a
    resumed run was started with, else ``full`` on a cluster with GPUs and ``local`` without."""
    if request.asked_profile:
        return request.asked_profile, None
    if request.recorded_profile:
        return request.recorded_profile, None
    if cluster.get("GPU", 0) > 0:
        return "full", "the cluster has GPUs"
    return "local", "the cluster has no GPU"


def settle(
    request: SearchRequest, cluster: dict[str, float]
) -> tuple[SearchSpec, str, tuple[Replacement, ...], str | None]:
    """The profile for ``cluster`` (said when doctune chose it), the spec validated for it, fitted
    to the cluster and checked to fit it (``InfeasibleResources`` otherwise), what the profile
    replaced of the spec's own values (said once) and how the spec was fitted (said)."""
    profile, why = choose_profile(request, cluster)
    if why:
        log.info(f"doctune: profile {profile!r} ({why}; choose with --profile)")
    if replaced := request.replacements(profile):
        log.info(
            f"doctune: profile {profile!r} replaced values the spec sets: "
            + ", ".join(r.describe() for r in replaced)
            + f" (keep yours with a profiles.{profile} section in the spec)",
        )
    spec, fit = fit_to_cluster(request.spec_for(profile), cluster)
    if fit:
        log.info(f"doctune: {fit}")
    plan_search_resources(spec, cluster)
    return spec, profile, tuple(replaced), fit


def this_machine() -> dict[str, float]:
    """The resources a local Ray started here will have."""
    import torch

    gpus = float(torch.cuda.device_count())
    return {"CPU": float(os.cpu_count() or 1), "GPU": gpus, LARGEST_NODE_GPUS: gpus}


def fit_to_cluster(spec: SearchSpec, cluster: dict[str, float]) -> tuple[SearchSpec, str | None]:
    """``spec`` with its ``auto`` resources made numbers for ``cluster`` and, then, how (printed,
    recorded in search.json): ``train.workers`` first, then ``evaluation.gpus_per_evaluator``. Values
    the spec gives are kept as written."""
    spec, workers = _fit_workers(spec, cluster)
    spec, evaluator_gpus = _fit_evaluator_gpus(spec, cluster)
    spec, evaluator_cpus = _fit_evaluator_cpus(spec, cluster)
    notes = [note for note in (workers, evaluator_gpus, evaluator_cpus) if note]
    return spec, "; ".join(notes) or None


def _fit_workers(spec: SearchSpec, cluster: dict[str, float]) -> tuple[SearchSpec, str | None]:
    """``train.workers: auto``: one worker per GPU of the largest node that splits every batch evenly."""
    train = spec.train
    if train.workers != "auto":
        return spec, None
    node_gpus = cluster.get(LARGEST_NODE_GPUS, cluster.get("GPU", 0.0))
    batch_sizes = tuple(values_of(spec, "batch_size") or (train.batch_size,))
    if spec.base is not None:  # the base trains on the trials' workers too
        batch_sizes += (spec.base.batch_size,)
    losses = plugin_registries()["loss"]
    min_per_worker = max(losses[loss].min_pairs_per_worker for loss in losses_of(spec))
    workers = auto_workers(node_gpus, train.gpus_per_worker, batch_sizes, min_per_worker)
    fitted = dataclasses.replace(spec, train=dataclasses.replace(train, workers=workers))
    check_semantics(fitted)
    batch = ", ".join(f"{b} → {b // workers}" for b in dict.fromkeys(batch_sizes))
    chunks = ""
    if train.chunk_size == "auto":
        chunks = ", encoded in GradCache chunks each worker sizes to its memory"
    elif train.chunk_size:
        chunks = f", encoded in GradCache chunks of {train.chunk_size}"
    hardware = f"{node_gpus:g} GPU on the largest node" if train.gpus_per_worker > 0 else "CPU training"
    return fitted, (
        f"train.workers auto → {workers} ({hardware}): the global batch stays, each worker taking its share "
        f"({batch} pairs{chunks}); negatives are gathered from every worker, so each pair meets the same number"
    )


def _fit_evaluator_gpus(spec: SearchSpec, cluster: dict[str, float]) -> tuple[SearchSpec, str | None]:
    """``evaluation.gpus_per_evaluator: auto``: none without GPUs; with GPUs an eighth of one each
    (a quarter between them at most), so checkpoints are scored at GPU speed. Workers that hold
    whole GPUs give up the evaluators' share of theirs, so the evaluators fit beside a trial instead
    of taking a trial's place (on one GPU machine no trial could start otherwise): a worker still
    trains alone on its GPU, since two workers of 0.75 or more do not fit one, and the evaluators'
    kernels interleave with its own."""
    evaluation, train = spec.evaluation, spec.train
    if evaluation.gpus_per_evaluator != "auto":
        return spec, None
    gpus = cluster.get("GPU", 0.0)
    share = min(EVALUATOR_GPU_SHARE, EVALUATORS_GPU_CAP / evaluation.evaluators) if gpus > 0 else 0.0
    together = evaluation.evaluators * share
    note = f"evaluation.gpus_per_evaluator auto → {share:g}"
    if not share:
        note += " (no GPU in the cluster): the evaluators embed on their CPUs"
    elif train.gpus_per_worker == 1:
        train = dataclasses.replace(train, gpus_per_worker=1 - together)
        note += (
            f" ({evaluation.evaluators} evaluators score on the GPU); train.gpus_per_worker 1 → {1 - together:g}, "
            "so the evaluators fit beside a trial's workers on their GPUs"
        )
    else:
        note += f" ({evaluation.evaluators} evaluators score on the GPU)"
    evaluation = dataclasses.replace(evaluation, gpus_per_evaluator=share)
    fitted = dataclasses.replace(spec, train=train, evaluation=evaluation)
    check_semantics(fitted)
    return fitted, note


def _fit_evaluator_cpus(spec: SearchSpec, cluster: dict[str, float]) -> tuple[SearchSpec, str | None]:
    """``evaluation.cpus_per_evaluator: auto``: what one trial leaves of the cluster's CPUs, split
    between the evaluators (``auto_evaluator_cpus``), so a one-GPU workstation of 8 CPUs runs a trial
    and its evaluators; their torch threads at most their CPUs."""
    evaluation, train = spec.evaluation, spec.train
    if evaluation.cpus_per_evaluator != "auto":
        return spec, None
    trial = TRIAL_CPU + train.workers * train.cpus_per_worker
    cpus = auto_evaluator_cpus(cluster.get("CPU", 0.0), trial, evaluation.evaluators)
    threads = min(evaluation.threads, int(cpus))
    fitted = dataclasses.replace(
        spec, evaluation=dataclasses.replace(evaluation, cpus_per_evaluator=cpus, threads=threads)
    )
    check_semantics(fitted)
    note = (
        f"evaluation.cpus_per_evaluator auto → {cpus:g} (what a trial's {trial:g} CPU leave of the cluster's "
        f"{cluster.get('CPU', 0.0):g}, between {evaluation.evaluators} evaluators, at most {EVALUATOR_CPUS_CAP} each)"
    )
    if threads != evaluation.threads:
        note += f"; evaluation.threads {evaluation.threads} → {threads}"
    return fitted, note


def plan_search_resources(spec: SearchSpec, cluster: dict[str, float]) -> ResourcePlan:
    """The resource plan of ``spec`` on ``cluster`` (``InfeasibleResources`` when one trial cannot fit)."""
    return plan_resources(spec.train, spec.evaluation, spec.search.samples, spec.search.max_concurrent, cluster)


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
    spec: SearchSpec,
    *,
    spec_path: Path,
    profile: str,
    run_dir: Path,
    model_dir: str,
    corpus: PreparedCorpus,
    cluster: dict[str, float],
    source_model: str | None = None,
    replaced: tuple[Replacement, ...] = (),
    fit: str | None = None,
    growth: str | None = None,
) -> ResolvedSearch:
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
        profile=profile,
        run_dir=run_dir,
        train_plan=plan,
        evaluation=eval_plan,
        fixed=spec.fixed_hyperparameters(),
        resources=resources,
        corpus_stats=corpus.stats,
        source_model=source_model or model_dir,
        inputs=InputsPlan.of(spec),
        tracking=spec.tracking,
        spec_record=dataclasses.asdict(spec),
        replaced=tuple(replaced),
        fit=fit,
        growth=growth,
    )
