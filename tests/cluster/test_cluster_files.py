"""Every cluster file in the repository passes Ray's own launcher validation and reads no variable a
node never has; cluster.yaml runs doctune's image on every node, with the cluster's token and an
instance profile on each, and marks every value a user must change."""

from __future__ import annotations

import copy
import re

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
    # every node runs doctune's image, which holds the node lock; GPU workers get their GPUs in it
    assert config["docker"]["image"].rsplit(":", 1)[-1] != "latest"
    assert config["docker"]["worker_run_options"] == ["--gpus all"]


@pytest.mark.parametrize("path", CLUSTER_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_node_installs_anything_once_rays_defaults_are_filled_in(path):
    """Every package is in the image or the environment the nodes share (locks/node.txt): the
    prepared file, with Ray's defaults (an unlocked ``pip install boto3`` on an AWS head), installs none."""
    prepared = _validated(yaml.safe_load(path.read_text()))
    installs = [c for c in _commands(prepared) if re.search(r"\b(pip|uv|conda|apt-get) install\b", c)]
    assert installs == []


def test_no_node_mounts_a_shared_file_system():
    """The run and everything its nodes share travel through the bucket: no mount, no volume."""
    prepared = _validated(yaml.safe_load((ROOT / "cluster.yaml").read_text()))
    found = [c for c in _commands(prepared) if re.search(r"\bmount\b|--volume|-v /|nfs|efs", c, re.IGNORECASE)]
    assert found == []


def test_every_node_type_can_write_the_bucket():
    config = yaml.safe_load((ROOT / "cluster.yaml").read_text())
    for name, node_type in config["available_node_types"].items():
        assert "IamInstanceProfile" in node_type["node_config"], name  # Ray gives only the head a default one


@pytest.mark.parametrize("path", CLUSTER_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_node_starts_ray_in_token_mode_with_the_clusters_token(path):
    """The mode must match on every node (``ray start --address`` never turns it on by itself) and
    the token reach each one where ``ray start`` reads it."""
    config = yaml.safe_load(path.read_text())
    for commands in (config["head_start_ray_commands"], config["worker_start_ray_commands"]):
        (start,) = [c for c in commands if "ray start" in c]
        assert re.search(r"(^|; )RAY_AUTH_MODE=token \S*ray start", start), start
    assert config["file_mounts"]["~/.ray/auth_token"] == "~/.ray/auth_token"


# what a node's shell has without being told: the launcher's own variable and the login shell's
LAUNCHER_AND_SHELL = {"RAY_HEAD_IP", "HOME", "PATH", "USER", "PWD", "SHELL", "HOSTNAME"}
COMMAND_LISTS = (
    "initialization_commands",
    "setup_commands",
    "head_setup_commands",
    "worker_setup_commands",
    "head_start_ray_commands",
    "worker_start_ray_commands",
)
DOCKER_OPTIONS = ("run_options", "head_run_options", "worker_run_options")


def _commands(config: dict) -> list[str]:
    """Every command a node runs and every option its container starts with, per node type too."""
    found = [c for key in COMMAND_LISTS for c in config.get(key) or []]
    found += [o for key in DOCKER_OPTIONS for o in (config.get("docker") or {}).get(key) or []]
    for node_type in config.get("available_node_types", {}).values():
        found += [c for key in COMMAND_LISTS for c in node_type.get(key) or []]
        found += [o for key in DOCKER_OPTIONS for o in (node_type.get("docker") or {}).get(key) or []]
    return found


def _unset_variables(command: str) -> set[str]:
    """The variables ``command`` reads that neither the launcher, the shell nor the command sets."""
    read = set(re.findall(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)", command))
    assigned = set(re.findall(r"(?:^|[\s;(&|])(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=", command))
    return read - assigned - LAUNCHER_AND_SHELL


@pytest.mark.parametrize("path", CLUSTER_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_command_reads_a_variable_the_launcher_never_sets(path):
    # the launcher runs node commands over SSH with none of your shell's environment; what it runs is
    # the prepared file, Ray's defaults filled in
    commands = _commands(_validated(yaml.safe_load(path.read_text())))
    assert commands and {c: v for c in commands if (v := _unset_variables(c))} == {}


def test_the_variable_scan_finds_what_no_node_has():
    assert _unset_variables('mount "${DOCTUNE_EFS:-fs-x}:/" /mnt') == {"DOCTUNE_EFS"}
    assert _unset_variables("ray start --address=$RAY_HEAD_IP:6379") == set()
    assert _unset_variables('x=1; echo "$x $HOME"') == set()


def test_every_value_to_edit_is_marked_in_the_file_and_named_in_the_readme():
    text, guide = (ROOT / "cluster.yaml").read_text(), (ROOT / "docs" / "cluster.md").read_text()
    edits = re.findall(r"EDIT (\w+)", text)
    assert set(edits) == {"image", "region", "zones", "ami", "subnets", "head_profile", "worker_profile", "registry"}, (
        edits
    )
    section = guide[guide.index("# On a GPU cluster") :]
    assert all(f"`{name}`" in section for name in edits), [n for n in edits if f"`{n}`" not in section]


def test_rays_validator_rejects_a_broken_cluster_file():
    config = yaml.safe_load((ROOT / "cluster.yaml").read_text())
    config["available_node_types"]["head"]["not_a_key"] = 1
    with pytest.raises(Exception, match=r"not_a_key|Additional properties"):
        _validated(config)
