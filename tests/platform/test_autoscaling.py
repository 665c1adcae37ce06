"""What an autoscaler may launch, read from the config ``ray up`` leaves on the head, and the plan
made for it (``platform.cluster.autoscaling``). The autoscaler itself, launching nodes for a search's
trials: tests/cluster/test_autoscaling.py."""

from __future__ import annotations

import yaml

from platform.cluster.autoscaling import from_cluster_config, launchable, plan_for_growth
from platform.cluster.resources import LARGEST_NODE_GPUS
from platform.search_path.settling import fit_to_cluster, plan_search_resources
from platform.spec import load_spec
from tests.conftest import ROOT


def _bootstrap_config(tmp_path, **resources):
    """cluster.yaml as ``ray up`` writes it to the head: each node type's resources filled in."""
    config = yaml.safe_load((ROOT / "cluster.yaml").read_text())
    for name, filled in resources.items():
        config["available_node_types"][name]["resources"] = filled
    path = tmp_path / "ray_bootstrap_config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_the_shipped_cluster_is_planned_as_docs_scaling_works_it_through(tmp_path):
    path = _bootstrap_config(tmp_path, head={"CPU": 16}, gpu_worker={"CPU": 48, "GPU": 4})
    up = {"CPU": 16.0, "GPU": 0.0, LARGEST_NODE_GPUS: 0.0}  # the head alone, as `ray up` leaves it
    planned, said = plan_for_growth(up, {"CPU": 16.0}, launchable(path))
    assert (planned["CPU"], planned["GPU"], planned[LARGEST_NODE_GPUS]) == (784, 64, 4)
    assert "the autoscaler may add 16 x gpu_worker (48 CPU, 4 GPU)" in said and str(path) in said
    spec, _ = fit_to_cluster(load_spec("docsplit_long", "full")[0], planned)
    plan = plan_search_resources(spec, planned)
    assert (spec.train.workers, plan.max_concurrent) == (4, 16)  # docs/scaling.md: 16 trials at once


def test_the_top_level_max_workers_caps_the_types_counting_gpu_types_first(tmp_path):
    config = {
        "max_workers": 3,
        "head_node_type": "head",
        "available_node_types": {
            "head": {"resources": {"CPU": 8}, "max_workers": 0},
            "cpu_worker": {"resources": {"CPU": 32}, "max_workers": 4},
            "gpu_worker": {"resources": {"CPU": 16, "GPU": 2}, "max_workers": 2},
            "unsized": {"resources": {}, "max_workers": 4},  # nothing known to plan with: not counted
        },
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    found = launchable(path)
    assert [(t.name, n) for t, n in found.counted()] == [("gpu_worker", 2), ("cpu_worker", 1)]
    planned, _ = plan_for_growth({"CPU": 8.0, "GPU": 0.0, LARGEST_NODE_GPUS: 0.0}, {"CPU": 8.0}, found)
    assert (planned["CPU"], planned["GPU"], planned[LARGEST_NODE_GPUS]) == (8 + 2 * 16 + 32, 4, 2)


def test_nodes_up_beyond_the_config_are_kept(tmp_path):
    path = _bootstrap_config(tmp_path, head={"CPU": 16}, gpu_worker={"CPU": 48, "GPU": 4})
    up = {"CPU": 2000.0, "GPU": 80.0, LARGEST_NODE_GPUS: 8.0}  # nodes joined by hand as well
    planned, _ = plan_for_growth(up, {"CPU": 16.0}, launchable(path))
    assert (planned["CPU"], planned["GPU"], planned[LARGEST_NODE_GPUS]) == (2000, 80, 8)


def test_no_config_and_a_config_of_no_sized_worker_type_add_nothing(tmp_path):
    assert launchable(tmp_path / "absent.yaml") is None
    assert launchable(_bootstrap_config(tmp_path)) is None  # cluster.yaml as written: resources detected at `ray up`


def test_a_config_doctune_cannot_read_is_a_warning_and_the_nodes_up_are_planned(tmp_path, capsys):
    path = tmp_path / "ray_bootstrap_config.yaml"
    path.write_text("available_node_types: [not, a, mapping")
    assert launchable(path) is None
    assert "is not a cluster config doctune can read" in capsys.readouterr().err


def test_a_reported_cluster_config_counts_unlimited_groups_within_the_resource_caps():
    from ray.core.generated.autoscaler_pb2 import ClusterConfig, NodeGroupConfig

    config = ClusterConfig(
        max_resources={"GPU": 16, "CPU": 1000},
        node_group_configs=[
            NodeGroupConfig(name="gpu", resources={"CPU": 48, "GPU": 4}, max_count=-1),  # no limit of its own
            NodeGroupConfig(name="cpu", resources={"CPU": 16}, max_count=2),
        ],
    )
    found = from_cluster_config(config)
    assert [(t.name, n) for t, n in found.counted()] == [("gpu", 4), ("cpu", 2)]  # 16 GPUs / 4 per node
    planned, _ = plan_for_growth({"CPU": 8.0, "GPU": 0.0, LARGEST_NODE_GPUS: 0.0}, {"CPU": 8.0}, found)
    assert (planned["CPU"], planned["GPU"], planned[LARGEST_NODE_GPUS]) == (8 + 4 * 48 + 2 * 16, 16, 4)
