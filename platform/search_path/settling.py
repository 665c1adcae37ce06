"""A search settled on its cluster (``settle``): the profile chosen, the spec validated for it, its
``auto`` resources fitted to the cluster (``fit_to_cluster``) and the whole checked to fit it.

``fit_to_cluster``: ``train.workers: auto`` made a count, one worker per GPU of the largest node
that splits the global batch evenly; ``evaluation.gpus_per_evaluator: auto`` a share of a GPU where
the cluster has one; ``evaluation.cpus_per_evaluator: auto`` what one trial leaves of the cluster's
CPUs (a resumed search keeps what it started with: ``platform.search_path.request``).
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass

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
from platform.search_path.request import SearchRequest
from platform.spec import Replacement, SearchSpec
from platform.spec.checks import check_semantics, losses_of, values_of
from platform.spec.convert import plugin_registries

log = logging.getLogger(f"doctune.{__name__}")


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


@dataclass(frozen=True)
class Settled:
    """A search's spec for its cluster: validated for ``profile``, its ``auto`` resources fitted
    (``fit`` says how) and checked to fit; ``replaced``: what the profile's built-in overrides
    changed of the spec's own values."""

    spec: SearchSpec
    profile: str
    replaced: tuple[Replacement, ...]
    fit: str | None


def settle(request: SearchRequest, cluster: dict[str, float]) -> Settled:
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
    return Settled(spec, profile, tuple(replaced), fit)


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
