"""Every cluster file in the repository passes Ray's own launcher validation."""

from __future__ import annotations

import copy

import pytest
import yaml
from ray.autoscaler._private.util import prepare_config, validate_config

from tests.conftest import ROOT

CLUSTER_FILES = sorted(p for p in ROOT.rglob("*.yaml") if "cluster" in p.name and ".venv" not in p.parts)


def _validated(config: dict) -> dict:
    prepared = prepare_config(copy.deepcopy(config))
    validate_config(prepared)
    return prepared


def test_the_root_cluster_file_exists_and_is_found():
    assert ROOT / "cluster.yaml" in CLUSTER_FILES


@pytest.mark.parametrize("path", CLUSTER_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_cluster_file_passes_rays_validator(path):
    config = yaml.safe_load(path.read_text())
    prepared = _validated(config)
    assert prepared["head_node_type"] in prepared["available_node_types"]


# AWS instance families with NVIDIA GPUs (Ray detects their GPUs; the file declares none by hand)
GPU_FAMILIES = ("g4dn", "g5", "g6", "g6e", "p3", "p4d", "p4de", "p5")


def test_the_cluster_has_gpu_workers_and_keeps_the_dashboard_on_localhost():
    config = yaml.safe_load((ROOT / "cluster.yaml").read_text())
    workers = [t for name, t in config["available_node_types"].items() if name != config["head_node_type"]]
    assert workers and all(t["max_workers"] >= t.get("min_workers", 0) for t in workers)
    # the cluster-wide cap lets every worker type reach its own (docs/scaling.md's 64-GPU search)
    assert config["max_workers"] >= sum(t["max_workers"] for t in workers)
    for worker in workers:  # every worker type is a GPU instance, or declares its GPUs
        family = worker["node_config"]["InstanceType"].split(".")[0]
        assert family in GPU_FAMILIES or worker.get("resources", {}).get("GPU", 0) > 0, family
    head = config["available_node_types"][config["head_node_type"]]
    assert head["node_config"]["InstanceType"].split(".")[0] not in GPU_FAMILIES  # the driver needs no GPU
    head_start = " ".join(config["head_start_ray_commands"])
    assert "--dashboard-host=127.0.0.1" in head_start
    assert any("scripts/setup.sh" in c for c in config["setup_commands"])


def test_rays_validator_rejects_a_broken_cluster_file():
    config = yaml.safe_load((ROOT / "cluster.yaml").read_text())
    config["available_node_types"]["head"]["not_a_key"] = 1
    with pytest.raises(Exception, match=r"not_a_key|Additional properties"):
        _validated(config)
