"""``train.workers: auto`` fitted to the cluster (``platform.resolution.fit_to_cluster``): the
unedited docsplit_long at its full profile on one GPU, one node of 4 or 8 and two nodes of 4."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time

import pytest

from platform.resolution import check_matches_recording, fit_to_cluster, plan_search_resources
from platform.resources import LARGEST_NODE_GPUS, auto_workers
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
        ({"CPU": 16, "GPU": 1, LARGEST_NODE_GPUS: 1}, 1, 1),
        ({"CPU": 48, "GPU": 4, LARGEST_NODE_GPUS: 4}, 4, 1),
        ({"CPU": 96, "GPU": 8, LARGEST_NODE_GPUS: 8}, 8, 1),
        ({"CPU": 96, "GPU": 8, LARGEST_NODE_GPUS: 4}, 4, 2),  # two nodes of 4: a trial on each
    ],
)
def test_the_unedited_default_search_fits_gpu_machines_of_any_size(cluster, workers, at_once):
    spec, _ = load_spec("docsplit_long", "full")
    assert spec.train.workers == "auto"
    fitted, why = fit_to_cluster(spec, cluster)
    plan = plan_search_resources(fitted, cluster)  # raises InfeasibleResources where it cannot fit
    assert fitted.train.workers == workers and plan.max_concurrent == at_once
    assert fitted.train.batch_size == spec.train.batch_size == 64  # the global batch (and its negatives) stays
    assert why.startswith(f"train.workers auto → {workers} ") and f"64 → {64 // workers} pairs" in why


def test_a_count_the_spec_gives_is_kept():
    spec, _ = load_spec("seed_study", "full")
    assert fit_to_cluster(spec, {"CPU": 96, "GPU": 8, LARGEST_NODE_GPUS: 8}) == (spec, None)


FIT_ON_THE_CLUSTER = """
import json, sys, time
import ray
from platform import common
from platform.resolution import check_matches_recording, fit_to_cluster, plan_search_resources
from platform.spec import load_spec

deadline = time.monotonic() + 120
while True:  # the head's GCS takes a moment to listen
    try:
        cluster = common.ray_init(sys.argv[1])
        if sum(node["Alive"] for node in ray.nodes()) == 2:
            break
        ray.shutdown()
    except ConnectionError:
        pass
    assert time.monotonic() < deadline, "the two Ray nodes did not come up"
    time.sleep(1)
spec, why = fit_to_cluster(load_spec("docsplit_long", "full")[0], cluster)
plan = plan_search_resources(spec, cluster)
print(json.dumps({"workers": spec.train.workers, "at_once": plan.max_concurrent, "why": why, "cluster": cluster}))
"""


@pytest.mark.slow  # starts two Ray nodes
def test_two_declared_gpu_nodes_plan_a_trial_on_each(tmp_path):
    env = {name: value for name, value in os.environ.items() if name != "RAY_ADDRESS"}  # the suite's "local"
    env |= {"RAY_AUTH_MODE": "disabled", "PYTHONPATH": str(ROOT)}  # a throwaway cluster on one machine
    nodes = LocalNodes(env)
    nodes.start_head(cpus=48, gpus=4)
    nodes.add(cpus=48, gpus=4)
    started = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, "-c", FIT_ON_THE_CLUSTER, nodes.address],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        nodes.stop()
    assert done.returncode == 0, done.stderr[-3000:]
    fit = json.loads(done.stdout.strip().splitlines()[-1])
    assert fit["cluster"]["GPU"] == 8 and fit["cluster"][LARGEST_NODE_GPUS] == 4, fit["cluster"]
    assert (fit["workers"], fit["at_once"]) == (4, 2), (fit, time.monotonic() - started)


def test_a_resumed_search_keeps_the_count_it_started_with(tmp_path):
    spec, _ = load_spec("docsplit_long", "full")
    started, _ = fit_to_cluster(spec, {"CPU": 96, "GPU": 8, LARGEST_NODE_GPUS: 8})
    recorded = {"resolved_spec": json.loads(json.dumps(dataclasses.asdict(started), default=str))}
    resumed = check_matches_recording(spec, recorded | {"spec": "docsplit_long", "profile": "full"}, tmp_path)
    assert resumed.train.workers == 8  # its checkpoints hold 8 stream positions
    assert fit_to_cluster(resumed, {"CPU": 16, "GPU": 1, LARGEST_NODE_GPUS: 1}) == (resumed, None)
