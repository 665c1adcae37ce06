"""The nodes an autoscaling cluster may still launch, so a search plans for the cluster it can grow to.

A cluster launched with ``ray up cluster.yaml`` starts with no GPU worker (``min_workers: 0``):
its GPU nodes come when a task, actor or placement group asks for GPUs. A search planned from the
nodes up alone would see no GPU, choose the CPU profile and never ask for one. So the driver adds
what the autoscaler may launch, read from (the first found):

1. the cluster config an autoscaler reports to the GCS (``ray._private.state.state.get_cluster_config()``,
   which Ray Train and Ray Data read for the same reason; Ray 2.60's own autoscaler does not write it,
   platforms that run their own may);
2. ``~/ray_bootstrap_config.yaml``, the config ``ray up`` leaves on the head node and starts the
   autoscaler with (the driver of ``ray job submit`` runs on the head; Ray Tune checks the same
   file to tell a launched cluster). ``ray up`` has filled in each node type's resources there.

The plan is then made for the head's resources plus each worker type's ``max_workers`` nodes (the
top-level ``max_workers`` capping their sum, the GPU types counted first), or the nodes up where
they are more. The trials' pending placement groups make the autoscaler launch the nodes; their
Train worker groups wait for them (``platform.cluster.ray_cluster.ray_init``).
"""

from __future__ import annotations

import dataclasses
import logging
import math
from dataclasses import dataclass
from pathlib import Path

import yaml

from platform.cluster.resources import LARGEST_NODE_GPUS

log = logging.getLogger(f"doctune.{__name__}")

BOOTSTRAP_CONFIG = Path("~/ray_bootstrap_config.yaml")
HEAD_NODE_RESOURCE = "node:__internal_head__"  # every Ray head node has it


@dataclass(frozen=True)
class NodeType:
    name: str
    resources: dict[str, float]
    max_workers: int


@dataclass(frozen=True)
class Launchable:
    """The worker node types an autoscaler may launch, and where that was read."""

    node_types: tuple[NodeType, ...]
    max_workers: int | None  # the cap on all worker nodes together
    source: str
    max_resources: dict[str, float] = dataclasses.field(default_factory=dict)  # caps on the cluster's totals

    def counted(self) -> list[tuple[NodeType, int]]:
        """How many nodes of each type the plan counts: GPU types first, within ``max_workers``."""
        left = self.max_workers if self.max_workers is not None else sum(t.max_workers for t in self.node_types)
        counted = []
        for node_type in sorted(self.node_types, key=lambda t: -t.resources.get("GPU", 0.0)):
            count = min(node_type.max_workers, left)
            if count > 0:
                counted.append((node_type, count))
                left -= count
        return counted


def _from_gcs() -> Launchable | None:
    import ray._private.state

    try:
        config = ray._private.state.state.get_cluster_config()
    except Exception:  # an older GCS without the key's namespace: nothing reported
        return None
    return from_cluster_config(config) if config is not None and config.node_group_configs else None


def from_cluster_config(config) -> Launchable:
    """The worker groups of a reported ``ClusterConfig`` (Ray's protobuf): a group without a limit
    of its own (``max_count`` -1) counts as many nodes as the cluster's resource caps allow."""
    caps = {k: float(v) for k, v in config.max_resources.items()}
    node_types = []
    for group in config.node_group_configs:
        resources = {k: float(v) for k, v in group.resources.items()}
        count = group.max_count
        if count < 0:
            count = min((math.floor(caps[k] / v) for k, v in resources.items() if k in caps and v > 0), default=0)
        if HEAD_NODE_RESOURCE not in resources:
            node_types.append(NodeType(group.name, resources, count))
    return Launchable(tuple(node_types), None, "the cluster config the autoscaler reported to the GCS", caps)


def _from_bootstrap_config(path: Path) -> Launchable | None:
    path = path.expanduser()
    if not path.is_file():
        return None
    try:
        config = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        head_type = config.get("head_node_type")
        node_types = tuple(
            NodeType(
                name, {k: float(v) for k, v in (node.get("resources") or {}).items()}, int(node.get("max_workers", 0))
            )
            for name, node in (config.get("available_node_types") or {}).items()
            if name != head_type
        )
        cap = config.get("max_workers")
        return Launchable(node_types, int(cap) if cap is not None else None, str(path))
    except (OSError, UnicodeDecodeError, yaml.YAMLError, AttributeError, TypeError, ValueError) as err:
        # the launcher's file, not the user's input to doctune: plan from the nodes up, and say why
        log.warning(
            f"doctune: warning: {path} is not a cluster config doctune can read ({type(err).__name__}: {err}); "
            "planning for the nodes up only",
        )
        return None


def _sized(found: Launchable | None) -> Launchable | None:
    """``found`` without the types of unknown size (the launcher fills resources in where the
    provider can tell): they add nothing to plan with."""
    if found is None:
        return None
    sized = tuple(t for t in found.node_types if t.max_workers > 0 and {"CPU", "GPU"} & set(t.resources))
    return dataclasses.replace(found, node_types=sized) if sized else None


def launchable(bootstrap_config: Path = BOOTSTRAP_CONFIG) -> Launchable | None:
    """What the autoscaler that ``bootstrap_config`` configures may launch; None when nothing."""
    return _sized(_from_bootstrap_config(bootstrap_config))


def plan_for_growth(
    up: dict[str, float], head: dict[str, float], can_launch: Launchable
) -> tuple[dict[str, float], str]:
    """The cluster a search plans for (Ray's resource totals plus ``LARGEST_NODE_GPUS``) and a line
    saying what was counted. ``up``: the nodes alive now (totals and ``LARGEST_NODE_GPUS``);
    ``head``: the head node's resources."""
    counted = can_launch.counted()
    grown = {key: float(value) for key, value in head.items() if key in ("CPU", "GPU")}
    for node_type, count in counted:
        for key in ("CPU", "GPU"):
            grown[key] = grown.get(key, 0.0) + count * node_type.resources.get(key, 0.0)
    planned = dict(up)
    for key in ("CPU", "GPU"):
        within = min(grown.get(key, 0.0), can_launch.max_resources.get(key, math.inf))
        planned[key] = max(up.get(key, 0.0), within)
    largest = max((t.resources.get("GPU", 0.0) for t, _ in counted), default=0.0)
    planned[LARGEST_NODE_GPUS] = max(up.get(LARGEST_NODE_GPUS, 0.0), largest)
    nodes = ", ".join(
        f"{count} x {t.name} ({t.resources.get('CPU', 0):g} CPU, {t.resources.get('GPU', 0):g} GPU)"
        for t, count in counted
    )
    return planned, (
        f"{up.get('CPU', 0):g} CPU / {up.get('GPU', 0):g} GPU up; the autoscaler may add {nodes} "
        f"(from {can_launch.source}): planned for {planned['CPU']:g} CPU / {planned['GPU']:g} GPU, "
        "and the trials' requests launch those nodes"
    )


def cluster_to_plan_for(cluster: dict[str, float]) -> tuple[dict[str, float], str | None]:
    """``cluster`` (the connected cluster's resources, ``platform.cluster.ray_cluster.ray_init``) grown by what
    its autoscaler may launch, and a line saying what was counted (None without an autoscaler).
    A Ray this driver started has none; the launcher's file is read only on the head node it
    describes (a driver elsewhere has no business with this machine's file)."""
    import ray
    from ray._private import worker

    if worker._global_node is not None and worker._global_node.head:  # started here, by ray.init
        return cluster, None
    head = next((node for node in ray.nodes() if node["Alive"] and HEAD_NODE_RESOURCE in node["Resources"]), None)
    on_head = head is not None and head["NodeManagerAddress"] == ray.util.get_node_ip_address()
    can_launch = _sized(_from_gcs()) or (launchable() if on_head else None)
    if can_launch is None or not can_launch.counted():
        return cluster, None
    return plan_for_growth(cluster, head["Resources"] if head else {}, can_launch)
