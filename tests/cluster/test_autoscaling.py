"""A search on an autoscaling cluster that starts with no GPU node plans for the GPU nodes its
autoscaler may launch, and its trials get them (``platform.cluster.autoscaling``).

The cluster is real: a Ray head started with ``--autoscaling-config`` runs Ray's autoscaler, whose
``fake_multinode`` provider launches worker nodes as local processes of the declared node types
(a GPU type with declared GPUs, ``min_workers: 0``). The config is where ``ray up`` leaves it on a
head node, ``~/ray_bootstrap_config.yaml`` (``HOME`` is the test's own). The head and every node its
autoscaler launches live in one process group, stopped by the test; no other Ray is touched.
The trial's workers hold the declared GPUs and train on the CPU (``tests.conftest.patched_search_env``).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time

import pytest
import yaml

from doctune_core.data import cache_dir
from tests.conftest import FEW_ITEMS, ROOT, patched_search_env, run_smoke_search, spec_variant
from tests.local_nodes import LocalNodes

pytestmark = [pytest.mark.autoscaling, pytest.mark.ray]

HEAD_CPUS = 8
GPU_NODE = {"CPU": 8, "GPU": 1}
HEAD_TYPE = "ray.head.default"  # the type Ray's fake provider gives the head it did not launch


def _cluster_config(gcs_address: str) -> dict:
    """A cluster launcher config for the ``fake_multinode`` provider: a CPU head and a GPU worker type."""
    return {
        "cluster_name": "doctune-autoscaling-test",
        "max_workers": 1,
        "provider": {
            "type": "fake_multinode",
            "use_node_id_as_ip": True,
            "disable_node_updaters": True,
            "disable_launch_config_check": True,
            "gcs_address": gcs_address,
        },
        "available_node_types": {
            HEAD_TYPE: {"resources": {"CPU": HEAD_CPUS, "GPU": 0}, "node_config": {}, "max_workers": 0},
            "gpu_worker": {"resources": GPU_NODE, "node_config": {}, "min_workers": 0, "max_workers": 1},
        },
        "head_node_type": HEAD_TYPE,
        "auth": {},
        "upscaling_speed": 1.0,
        "idle_timeout_minutes": 5,
        "docker": {},
        "file_mounts": {},
        "cluster_synced_files": [],
        "file_mounts_sync_continuously": False,
        "rsync_exclude": [],
        "rsync_filter": [],
        "initialization_commands": [],
        "setup_commands": [],
        "head_setup_commands": [],
        "worker_setup_commands": [],
        "head_start_ray_commands": [],
        "worker_start_ray_commands": [],
    }


def test_a_search_started_with_no_gpu_node_plans_for_the_autoscalers_gpus_and_gets_them(tmp_path):
    from ray._private.services import get_node_ip_address

    home = tmp_path / "home"
    home.mkdir()
    env = {name: value for name, value in os.environ.items() if name != "RAY_ADDRESS"}
    env = patched_search_env({**env, "PYTHONPATH": str(ROOT)}, gpus_declared_only=True)
    env |= {
        "HOME": str(home),
        "DOCTUNE_CACHE": str(cache_dir()),  # the prepared corpus and base, as in the rest of the suite
        "RAY_AUTH_MODE": "disabled",  # a throwaway cluster on one machine
        "RAY_FAKE_CLUSTER": "1",  # Ray's provider of local fake nodes refuses to start without it
        "AUTOSCALER_UPDATE_INTERVAL_S": "1",
    }
    nodes = LocalNodes(env)
    port = nodes.address.rsplit(":", 1)[1]
    config = home / "ray_bootstrap_config.yaml"
    config.write_text(yaml.safe_dump(_cluster_config(f"{get_node_ip_address()}:{port}")))
    nodes.start_head(cpus=HEAD_CPUS, gpus=0, autoscaling_config=config)
    # the driver on the head node, as `ray job submit` runs it; "auto" joins without shipping the
    # project as a working_dir package, which the nodes here would share (one session directory on
    # one machine) and the launched node's runtime-env agent would delete under the head's workers
    driver_env = env | {"RAY_ADDRESS": "auto"}
    try:
        before = nodes.wait_until_alive(1)
        # docs/cluster.md's cluster command, unedited spec and no --profile: the plan only
        planned = subprocess.run(
            [sys.executable, "-m", "platform.search", "docsplit_long", "--dry-run"],
            cwd=tmp_path, env=driver_env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        after_plan = nodes.nodes()
        # the run itself at smoke size, its trial's workers asking for a GPU each
        spec = spec_variant(
            "docsplit_long",
            tmp_path,
            **{
                "train.gpus_per_worker": 1.0,
                "train.workers": "auto",
                "search.samples": 1,
                "evaluation.limits": FEW_ITEMS,
            },
        )
        run_dir = tmp_path / "run"
        started = time.monotonic()
        searched = run_smoke_search(spec, run_dir, env=driver_env, cwd=tmp_path)
        after_run = nodes.nodes()
    finally:
        nodes.stop()

    assert planned.returncode == 0, planned.stderr[-3000:]
    assert [n["alive"] for n in before] == [True] and len(after_plan) == 1  # no worker node when the plan printed
    out = planned.stdout
    assert "the autoscaler may add 1 x gpu_worker (8 CPU, 1 GPU)" in out and str(config) in out
    assert "profile 'full' (the cluster has GPUs" in out
    summary = json.loads(out[out.index("{") :])
    assert summary["profile"] == "full" and summary["resources"]["cluster_gpus"] == 1
    assert summary["trial_plan"]["workers_per_trial"] == 1 and summary["trial_plan"]["max_concurrent"] == 1
    assert summary["resolved_spec"]["train"]["batch_size"] == 64  # the global batch kept on one GPU

    assert searched.returncode == 0, (searched.stdout[-3000:], searched.stderr[-3000:], time.monotonic() - started)
    head_id = before[0]["id"]
    launched = [n for n in after_run if n["id"] != head_id]
    assert launched and all(n["resources"].get("GPU") == 1 for n in launched), after_run
    (placement,) = run_dir.glob("trials/*/placement.json")
    ranks = json.loads(placement.read_text())["ranks"]
    assert ranks and all(r["node_id"] != head_id and r["gpu_ids"] for r in ranks), ranks
    assert all(r["device"] == "cpu" for r in ranks)  # declared GPUs, trained on CPU as the switch says
    # the default search's smoke run whole: the base as given and converted to a Longformer, and
    # the long study's validation-best setting (views: dropout), the first trial, trained and scored
    rows = json.loads((run_dir / "leaderboard.json").read_text())["rows"]
    assert {r["trial"] for r in rows if r["trial"].startswith("baseline")} == {"baseline", "baseline-converted"}
    (trial,) = [r for r in rows if not r["trial"].startswith("baseline")]
    assert trial["status"] == "completed" and trial["hyperparameters"]["views"] == "dropout"
    assert all(math.isfinite(r["objective"]) for r in rows)
    # its report-only document-similarity task, scored for the winner and the untrained start alike
    for row in [trial, *(r for r in rows if r["trial"] == "baseline-converted")]:
        assert 0.0 <= row["scores"]["20ng-topic-pairs"]["val"]["main"] <= 1.0, row["trial"]
