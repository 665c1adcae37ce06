"""How many trials run at once, computed from the cluster so no placement group can starve.

A trial holds ``TRIAL_CPU`` for its Tune actor plus ``workers x cpus_per_worker`` (and GPUs) for
its Train worker group, which Ray places in its own placement group, invisible to Tune. The
evaluators hold their share for the whole search. If concurrent trials ask for more than the
cluster has, the Train controller waits for workers forever, so the rule is

    max_concurrent x (TRIAL_CPU + workers x cpus_per_worker) + evaluators x cpus_per_evaluator <= cluster CPUs

and likewise for GPUs, counted as Ray places them: a worker holding a fraction of a GPU sits on one
GPU, so workers of 0.75 each take whole GPUs and leave a quarter of each free, where evaluators of
an eighth fit (``gpus_per_evaluator: auto``, ``platform.search_path.resolution``). A search
that cannot fit even one trial is refused before it starts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

TRIAL_CPU = 0.01  # the Tune trial actor only drives the Train run (0 is rejected by Tune)
# Beside Ray's totals in a cluster's resources: the GPUs of its largest node. A trial's workers are
# placed as one group, and ranks on one node all-reduce over NVLink/PCIe (docs/scaling.md).
LARGEST_NODE_GPUS = "largest_node_GPU"
# ``evaluation.gpus_per_evaluator: auto`` on a cluster with GPUs: an eighth of a GPU per evaluator,
# all of them together at most a quarter (so whole-GPU workers fitted to the rest stay alone on
# their GPUs). One scoring round of docsplit_long's full profile took 5.5-7.6 s on an eighth of an
# H100, where two 4-CPU evaluators had not scored the base after 4.5 minutes on an H200 machine's
# CPUs (bench/RESULTS.md at cf730cc, "Training on a GPU").
EVALUATOR_GPU_SHARE = 0.125
EVALUATORS_GPU_CAP = 0.25
# ``evaluation.cpus_per_evaluator: auto``: at most the 4 CPUs each the shipped GPU specs gave their two
# evaluators, so a 16-CPU machine keeps them; fewer where one trial leaves fewer (a 1-GPU, 8-CPU
# workstation), at least one each.
EVALUATOR_CPUS_CAP = 4


class InfeasibleResources(ValueError):
    """The spec asks for more than the cluster has; the message says what to change."""


@dataclass(frozen=True, kw_only=True)
class ResourcePlan:
    cluster_cpus: float
    cluster_gpus: float
    trial_cpus: float
    trial_gpus: float
    evaluator_cpus: float
    evaluator_gpus: float
    max_concurrent: int
    trial_gpu_devices: float  # the GPUs a trial's workers sit on (more than trial_gpus for fractions)

    def describe(self) -> str:
        devices = f" on {self.trial_gpu_devices:g}" if self.trial_gpu_devices != self.trial_gpus else ""
        gpus = f", {self.trial_gpus:g} GPU{devices}" if self.trial_gpus else ""
        return (
            f"cluster {self.cluster_cpus:g} CPU / {self.cluster_gpus:g} GPU; each trial holds "
            f"{self.trial_cpus:g} CPU{gpus}; evaluators hold {self.evaluator_cpus:g} CPU"
            f"{f' / {self.evaluator_gpus:g} GPU' if self.evaluator_gpus else ''}; "
            f"up to {self.max_concurrent} trial(s) at once"
        )


def auto_workers(node_gpus: float, gpus_per_worker: float, batch_sizes: tuple[int, ...], min_per_worker: int) -> int:
    """``train.workers: auto``: the most workers one node's GPUs hold (one for CPU training) that
    split every batch size evenly with at least ``min_per_worker`` pairs each; at least 1."""
    most = max(1, math.floor(node_gpus / gpus_per_worker + 1e-9)) if gpus_per_worker > 0 else 1
    fits = [w for w in range(1, most + 1) if all(b % w == 0 and b // w >= min_per_worker for b in batch_sizes)]
    return max(fits, default=1)


def auto_evaluator_cpus(cluster_cpus: float, trial_cpus: float, evaluators: int) -> float:
    """``evaluation.cpus_per_evaluator: auto``: the CPUs one trial leaves of the cluster's, split
    between the evaluators in whole CPUs, at least 1 and at most ``EVALUATOR_CPUS_CAP`` each."""
    each = math.floor((cluster_cpus - trial_cpus) / evaluators + 1e-9)
    return float(min(EVALUATOR_CPUS_CAP, max(1, each)))


def _workers_per_gpu(gpus_per_worker: float) -> int:
    return math.floor(1 / gpus_per_worker + 1e-9)


def gpus_taken(workers: int, gpus_per_worker: float) -> float:
    """The GPUs a trial's workers occupy: whole GPUs for workers holding a fraction each (as many
    workers on one GPU as fit it), so the fractions they leave free host evaluators, not workers."""
    if gpus_per_worker <= 0 or gpus_per_worker >= 1:
        return workers * gpus_per_worker
    return float(math.ceil(workers / _workers_per_gpu(gpus_per_worker)))


def most_left_beside_workers(workers: int, gpus_per_worker: float) -> float:
    """The largest share of one GPU that a trial's fractional workers leave free: on the GPU they
    fill least (0 for whole GPUs). Ray gives a fractional request the smallest free slice that fits
    it, so evaluators started before the trials pack onto one GPU: they fit beside a trial only
    when all of them fit this one slice."""
    if workers < 1 or gpus_per_worker <= 0 or gpus_per_worker >= 1:
        return 0.0
    per_gpu = _workers_per_gpu(gpus_per_worker)
    on_last = workers - (math.ceil(workers / per_gpu) - 1) * per_gpu
    return 1 - on_last * gpus_per_worker


def plan_resources(train, evaluation, samples: int, cap: int | None, cluster: dict[str, float]) -> ResourcePlan:
    cpus, gpus = float(cluster.get("CPU", 0)), float(cluster.get("GPU", 0))
    trial_cpus = TRIAL_CPU + train.workers * train.cpus_per_worker
    trial_gpus = train.workers * train.gpus_per_worker
    eval_cpus = evaluation.evaluators * evaluation.cpus_per_evaluator
    eval_gpus = evaluation.evaluators * evaluation.gpus_per_evaluator
    occupied = gpus_taken(train.workers, train.gpus_per_worker)
    # evaluators that fit in what one trial's workers leave free take no GPU from the trials
    beside = eval_gpus <= most_left_beside_workers(train.workers, train.gpus_per_worker) + 1e-9
    free_cpus, free_gpus = cpus - eval_cpus, gpus - (0.0 if beside else eval_gpus)
    concurrent = math.floor(free_cpus / trial_cpus + 1e-9) if free_cpus > 0 else 0
    if trial_gpus > 0:
        concurrent = min(concurrent, math.floor(free_gpus / occupied + 1e-9) if free_gpus > 0 else 0)
    if eval_gpus > gpus:
        concurrent = 0
    if concurrent < 1:
        raise InfeasibleResources(
            f"one trial needs {trial_cpus:g} CPU and {trial_gpus:g} GPU (train.workers x cpus/gpus_per_worker) "
            f"beside the evaluators' {eval_cpus:g} CPU and {eval_gpus:g} GPU, but the cluster has {cpus:g} CPU "
            f"and {gpus:g} GPU. Lower train.workers, train.cpus_per_worker, train.gpus_per_worker or "
            "evaluation.evaluators, or use --profile local on a machine without GPUs"
        )
    concurrent = min(concurrent, samples, cap or samples)
    return ResourcePlan(
        cluster_cpus=cpus,
        cluster_gpus=gpus,
        trial_cpus=trial_cpus,
        trial_gpus=trial_gpus,
        evaluator_cpus=eval_cpus,
        evaluator_gpus=eval_gpus,
        max_concurrent=concurrent,
        trial_gpu_devices=occupied,
    )
