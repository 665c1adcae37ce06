"""``train.workers``, ``evaluation.gpus_per_evaluator`` and ``evaluation.cpus_per_evaluator``
``auto`` fitted to the cluster (``platform.search_path.settling.fit_to_cluster``): the unedited docsplit_long
at its full profile on one GPU (8 or 16 CPUs), one node of 4 or 8, two nodes of 4 and the 64 GPUs
of docs/scaling.md (a one-GPU workstation of 8 CPUs also as a real Ray head of declared GPUs; two
real nodes of 4 in tests/cluster/test_slurm.py, brought up by the Slurm script)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import pytest
import torch

import platform
from doctune_core.data import cache_dir
from platform.cluster.resources import LARGEST_NODE_GPUS, auto_workers
from platform.search_path.request import check_matches_recording
from platform.search_path.settling import fit_to_cluster, plan_search_resources
from platform.spec import load_spec
from tests.conftest import ROOT
from tests.local_nodes import LocalNodes


@pytest.mark.parametrize(
    ("node_gpus", "gpus_per_worker", "batch_sizes", "min_per_worker", "workers"),
    [
        (1, 1, (64,), 1, 1),
        (8, 1, (64,), 1, 8),
        (8, 1, (36,), 1, 6),  # 36 does not split over 8 or 7
        (8, 0.5, (64,), 1, 16),
        (8, 1, (64, 48), 1, 8),
        (8, 1, (64, 12), 4, 2),  # 12 pairs over 4 workers leaves 3 each, below the loss's 4
        (0, 1, (64,), 1, 1),  # no GPU: one worker, refused later by the resource check
        (16, 0, (64,), 1, 1),  # CPU training: one worker
    ],
)
def test_auto_workers_fill_one_node_and_split_every_batch_evenly(
    node_gpus, gpus_per_worker, batch_sizes, min_per_worker, workers
):
    assert auto_workers(node_gpus, gpus_per_worker, batch_sizes, min_per_worker) == workers


@pytest.mark.parametrize(
    ("cluster", "workers", "at_once"),
    [
        ({"CPU": 8, "GPU": 1, LARGEST_NODE_GPUS: 1}, 1, 1),  # the commonest researcher's workstation
        ({"CPU": 16, "GPU": 1, LARGEST_NODE_GPUS: 1}, 1, 1),
        ({"CPU": 48, "GPU": 4, LARGEST_NODE_GPUS: 4}, 4, 1),
        ({"CPU": 96, "GPU": 8, LARGEST_NODE_GPUS: 8}, 8, 1),
        ({"CPU": 96, "GPU": 8, LARGEST_NODE_GPUS: 4}, 4, 2),  # two nodes of 4: a trial on each
        ({"CPU": 784, "GPU": 64, LARGEST_NODE_GPUS: 4}, 4, 16),  # docs/scaling.md's cluster, grown whole
    ],
)
def test_the_unedited_default_search_fits_gpu_machines_of_any_size(cluster, workers, at_once):
    spec, _ = load_spec("docsplit_long", "full")
    assert spec.train.workers == spec.evaluation.gpus_per_evaluator == "auto"
    fitted, why = fit_to_cluster(spec, cluster)
    plan = plan_search_resources(fitted, cluster)  # raises InfeasibleResources where it cannot fit
    assert fitted.train.workers == workers and plan.max_concurrent == at_once
    assert fitted.train.batch_size == spec.train.batch_size == 64  # the global batch (and its negatives) stays
    assert why.startswith(f"train.workers auto → {workers} ") and f"64 → {64 // workers} pairs" in why
    assert spec.train.chunk_size == "auto" and "GradCache chunks each worker sizes to its memory" in why
    # the checkpoints are scored on the GPUs, each evaluator in the eighth of a GPU its share leaves a worker
    assert (fitted.evaluation.gpus_per_evaluator, fitted.train.gpus_per_worker) == (0.125, 0.75)
    assert (plan.evaluator_gpus, plan.trial_gpu_devices) == (0.25, workers)
    assert "gpus_per_evaluator auto → 0.125 (2 evaluators score on the GPU); train.gpus_per_worker 1 → 0.75" in why
    # the evaluators take what a trial leaves of the CPUs: 4 each (the spec's earlier figure) where
    # that fits, 1 each (threads to match) on 8 CPUs, where 2 x 4 beside a trial's 4.01 could not
    each = 1.0 if cluster["CPU"] == 8 else 4.0
    assert (fitted.evaluation.cpus_per_evaluator, fitted.evaluation.threads) == (each, int(each))
    assert plan.evaluator_cpus + at_once * plan.trial_cpus <= cluster["CPU"]
    assert f"evaluation.cpus_per_evaluator auto → {each:g} " in why


@pytest.mark.parametrize(("evaluators", "share", "worker"), [(1, 0.125, 0.875), (4, 0.0625, 0.75), (8, 0.03125, 0.75)])
def test_more_evaluators_share_a_quarter_of_a_gpu_so_workers_stay_alone_on_theirs(evaluators, share, worker):
    spec, _ = load_spec("docsplit_long", "full")
    spec = dataclasses.replace(spec, evaluation=dataclasses.replace(spec.evaluation, evaluators=evaluators))
    for cluster in ({"CPU": 64, "GPU": 1, LARGEST_NODE_GPUS: 1}, {"CPU": 784, "GPU": 64, LARGEST_NODE_GPUS: 4}):
        fitted, _ = fit_to_cluster(spec, cluster)
        plan = plan_search_resources(fitted, cluster)
        assert (fitted.evaluation.gpus_per_evaluator, fitted.train.gpus_per_worker) == (share, worker)
        assert plan.trial_gpu_devices == fitted.train.workers  # one worker per GPU
        assert plan.max_concurrent == cluster["GPU"] // fitted.train.workers  # evaluators take no trial place


def test_without_gpus_the_evaluators_embed_on_their_cpus():
    spec, _ = load_spec("docsplit_long", "full")
    spec = dataclasses.replace(spec, train=dataclasses.replace(spec.train, gpus_per_worker=0.0, cpus_per_worker=1))
    fitted, why = fit_to_cluster(spec, {"CPU": 16, "GPU": 0, LARGEST_NODE_GPUS: 0})
    assert (fitted.evaluation.gpus_per_evaluator, fitted.train.gpus_per_worker) == (0.0, 0.0)
    assert "gpus_per_evaluator auto → 0 (no GPU in the cluster)" in why


def test_values_the_spec_gives_are_kept():
    spec, _ = load_spec("seed_study", "full")
    assert fit_to_cluster(spec, {"CPU": 96, "GPU": 8, LARGEST_NODE_GPUS: 8})[0].train.workers == spec.train.workers
    one_gpu = load_spec(str(ROOT / "bench" / "docsplit_long_1gpu.yaml"), "full")[0]  # every resource written
    assert fit_to_cluster(one_gpu, {"CPU": 16, "GPU": 1, LARGEST_NODE_GPUS: 1}) == (one_gpu, None)


def _dry_run_on(nodes: LocalNodes, env: dict, tmp_path) -> dict:
    """The README's command, unedited spec and no ``--profile``, planned on the running cluster."""
    done = subprocess.run(
        [sys.executable, "-m", "platform.search", "docsplit_long", "--dry-run"],
        cwd=tmp_path, env=env | {"RAY_ADDRESS": nodes.address}, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    return json.loads(out[out.index("{") :]) | {"printed": out[: out.index("{")]}


@pytest.mark.ray  # starts Ray nodes
@pytest.mark.own_ray  # at their own address, stopped by their process groups
@pytest.mark.parametrize(
    ("nodes_declared", "workers", "at_once"),
    [
        ([(8, 1)], 1, 1),  # a one-GPU workstation of 8 CPUs
    ],  # one node of 4 or 8 differs only in the numbers: the resources test above has them; two nodes
    # of 4 are the Slurm script's test
)
def test_the_dry_run_of_the_unedited_default_search_fits_declared_gpu_clusters(
    tmp_path, default_corpus, nodes_declared, workers, at_once
):
    env = {name: value for name, value in os.environ.items() if name != "RAY_ADDRESS"}  # the suite's "local"
    env |= {"RAY_AUTH_MODE": "disabled", "PYTHONPATH": str(ROOT)}  # a throwaway cluster on one machine
    env |= {"HOME": str(tmp_path), "DOCTUNE_CACHE": str(cache_dir())}  # no launcher's config of this machine's
    nodes = LocalNodes(env)
    (head_cpus, head_gpus), *others = nodes_declared
    nodes.start_head(cpus=head_cpus, gpus=head_gpus)
    for cpus, gpus in others:
        nodes.add(cpus=cpus, gpus=gpus)
    try:
        nodes.wait_until_alive(len(nodes_declared))
        summary = _dry_run_on(nodes, env, tmp_path)
    finally:
        nodes.stop()
    plan, resources = summary["trial_plan"], summary["resources"]
    assert summary["profile"] == "full" and "profile 'full' (the cluster has GPUs" in summary["printed"]
    assert resources["cluster_gpus"] == sum(gpus for _, gpus in nodes_declared)
    assert (plan["workers_per_trial"], plan["max_concurrent"]) == (workers, at_once), summary["fit"]
    assert summary["resolved_spec"]["train"]["batch_size"] == 64  # the global batch, whatever the fit
    assert f"train.workers auto → {workers} " in summary["printed"] and f"64 → {64 // workers} pairs" in summary["fit"]
    assert resources["trial_gpu_devices"] == workers and summary["cluster_growth"] is None  # no autoscaler here
    assert (resources["trial_gpus"], resources["evaluator_gpus"]) == (0.75 * workers, 0.25)  # scored on a GPU
    # what each node runs, asked of each node (its own installation), by node id
    nodes = summary["environment"]["nodes"]
    assert len(nodes) == len(nodes_declared) and {n["torch"] for n in nodes.values()} == {torch.__version__}
    assert all(n["python"] == platform.python_version() and "gpu" in n for n in nodes.values())
    cpus = sum(cpus for cpus, _ in nodes_declared)
    assert 1 <= summary["resolved_spec"]["evaluation"]["cpus_per_evaluator"] <= 4  # every evaluator has a CPU
    assert resources["evaluator_cpus"] + at_once * resources["trial_cpus"] <= cpus
    # a dry-run names the MLM head a run would train, or reuses the cached one; it trains nothing
    assert "training one" not in summary["printed"]
    assert "(not trained yet: a run trains it first)" in summary["printed"] or "reusing" in summary["printed"]


def test_a_resumed_search_keeps_the_count_it_started_with(tmp_path):
    spec, _ = load_spec("docsplit_long", "full")
    started, _ = fit_to_cluster(spec, {"CPU": 96, "GPU": 8, LARGEST_NODE_GPUS: 8})
    recorded = {"resolved_spec": json.loads(json.dumps(dataclasses.asdict(started), default=str))}
    resumed = check_matches_recording(spec, recorded | {"spec": "docsplit_long", "profile": "full"}, tmp_path)
    assert resumed.train.workers == 8  # its checkpoints hold 8 stream positions
    assert (resumed.evaluation.gpus_per_evaluator, resumed.train.gpus_per_worker) == (0.125, 0.75)
    # a run recorded before evaluators were fitted (CPU evaluators, whole-GPU workers) resumes as it ran
    before = dataclasses.replace(
        started,
        train=dataclasses.replace(started.train, gpus_per_worker=1.0),
        evaluation=dataclasses.replace(started.evaluation, gpus_per_evaluator=0.0),
    )
    recorded = {"resolved_spec": json.loads(json.dumps(dataclasses.asdict(before), default=str))}
    resumed = check_matches_recording(spec, recorded | {"spec": "docsplit_long", "profile": "full"}, tmp_path)
    assert (resumed.evaluation.gpus_per_evaluator, resumed.train.gpus_per_worker) == (0.0, 1.0)
    assert fit_to_cluster(resumed, {"CPU": 16, "GPU": 1, LARGEST_NODE_GPUS: 1}) == (resumed, None)
    # a run started on a one-GPU workstation of 8 CPUs keeps its evaluators' CPUs and threads
    small, _ = fit_to_cluster(spec, {"CPU": 8, "GPU": 1, LARGEST_NODE_GPUS: 1})
    recorded = {"resolved_spec": json.loads(json.dumps(dataclasses.asdict(small), default=str))}
    resumed = check_matches_recording(spec, recorded | {"spec": "docsplit_long", "profile": "full"}, tmp_path)
    assert (resumed.evaluation.cpus_per_evaluator, resumed.evaluation.threads) == (1.0, 1)
