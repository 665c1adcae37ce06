"""Starting or joining Ray with doctune's runtime environment, and what a Ray this process starts
needs on a busy machine."""

from __future__ import annotations

import logging
import os
import socket
from dataclasses import dataclass
from pathlib import Path

from doctune_core.logs import shows_library_output, tells_progress, worker_environment
from platform.cluster.autoscaling import cluster_to_plan_for
from platform.cluster.environment import ROOT
from platform.cluster.resources import LARGEST_NODE_GPUS

log = logging.getLogger(f"doctune.{__name__}")


@dataclass(frozen=True)
class ClusterChoice:
    """Where a search (or a study) runs, chosen once, from its spec's ``address``: a Ray this process
    starts (``own``), whose resources are this machine's and known before it starts, so bad input is
    refused before anything starts; or a running cluster, read once joined, with what its autoscaler
    may add counted (``platform.cluster.autoscaling``)."""

    address: str | None
    own: bool

    @classmethod
    def for_address(cls, address: str | None) -> ClusterChoice:
        return cls(address, starts_its_own_ray(address))

    def known_resources(self) -> dict[str, float] | None:
        """The resources before Ray starts: this machine's for a Ray of its own, else not known yet."""
        return this_machine() if self.own else None

    def join(self, trials_may_wait: bool = False, log_to_driver: bool = True) -> tuple[dict[str, float], str | None]:
        """Start or join Ray (``ray_init``); the cluster's resources to plan for and, on a running
        cluster an autoscaler grows, what it may add (said here)."""
        cluster = ray_init(self.address, trials_may_wait=trials_may_wait, log_to_driver=log_to_driver)
        if self.own:
            return cluster, None
        cluster, growth = cluster_to_plan_for(cluster)
        if growth:
            log.info(f"doctune: cluster: {growth}")
        return cluster, growth


def this_machine() -> dict[str, float]:
    """The resources a local Ray started here will have."""
    import torch

    gpus = float(torch.cuda.device_count())
    return {"CPU": float(os.cpu_count() or 1), "GPU": gpus, LARGEST_NODE_GPUS: gpus}


def recorded_address_if_alive(temp_dir: str | None = None) -> str | None:
    """``"local"`` when the Ray this node last started (``ray start`` records its address in
    ``<ray temp dir>/ray_current_cluster``) no longer answers, else None (Ray's own lookup, which
    joins that cluster). ``ray stop`` deletes the record; a Ray killed any other way (a reboot, an
    OOM kill, a killed session) leaves it, and ``ray.init()`` would then wait on a GCS that is gone
    instead of starting its own. The stale record is removed, as ``ray stop`` would have: Ray's
    own processes read it too (Ray Train's placement-group cleaner waits 12 s per trial on it)."""
    from ray._private.utils import get_ray_address_file, read_ray_address

    recorded = read_ray_address(temp_dir)
    if not recorded:
        return None
    host, _, port = recorded.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=2):
            return None
    except (OSError, ValueError):
        record = Path(get_ray_address_file(temp_dir))
        record.unlink(missing_ok=True)
        log.warning(
            f"doctune: note: no Ray answers at {recorded}, the address {record} recorded (a Ray stopped "
            "without `ray stop`); removed the record and starting a local Ray",
        )
        return "local"


# a Ray this process starts: its GCS may take this long to listen, its dashboard agent to register
LOCAL_RAY_START_LIMITS = {"RAY_gcs_server_port_wait_time_s": "120", "RAY_agent_register_timeout_ms": "120000"}
WORKERS_START_TIMEOUT_S = "1800"  # for a resumed search, and on a cluster an autoscaler grows


def ray_init(address: str | None, trials_may_wait: bool = False, log_to_driver: bool = True) -> dict[str, float]:
    """Start or join Ray with doctune's runtime environment; the cluster's resources.
    ``trials_may_wait``: Tune may start trials past what runs at once (a resumed experiment, PBT
    restarting the trials it paused), so their worker groups wait for the trials ahead.
    ``log_to_driver``: print the workers' output here (off for a dry run, whose standard output is
    its plan as JSON: on a running cluster, Ray's forwarded lines would otherwise follow it), and only
    where doctune's progress is shown (``doctune_core.logs.tells_progress``: not from Python at WARNING).
    Ray's own notes and warnings are shown with ``-v`` alone (``doctune_core.logs.shows_library_output``)."""
    import ray

    os.environ.setdefault("RAY_TRAIN_HEALTH_CHECK_INTERVAL_S", "0.5")  # default 2 s caps short trials
    env_vars = {
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        "RAY_TRAIN_HEALTH_CHECK_INTERVAL_S": os.environ["RAY_TRAIN_HEALTH_CHECK_INTERVAL_S"],
        "TOKENIZERS_PARALLELISM": "false",
    }
    address = address or os.environ.get("RAY_ADDRESS")
    for name, value in os.environ.items():  # DOCTUNE_CACHE and the other DOCTUNE_ settings
        if name in ("HF_HUB_OFFLINE", "HF_HOME") or name.startswith("DOCTUNE_"):
            env_vars[name] = value
    # every worker process asks Ray's state API about its own cluster and logs as this driver does
    # (doctune_core.nodes.set_up_worker)
    env_vars |= worker_environment()
    runtime_env: dict = {"env_vars": env_vars, "worker_process_setup_hook": "doctune_core.nodes.set_up_worker"}
    if "RAY_JOB_CONFIG_JSON_ENV_VAR" in os.environ:
        # inside `ray job submit --working-dir .`: the job's working directory reaches every node,
        # and these env_vars join the job's runtime env (Ray refuses a driver's that repeats a field)
        env_vars.pop("PYTHONPATH")
        os.environ["RAY_OVERRIDE_JOB_RUNTIME_ENV"] = "1"
    elif not address:
        address = recorded_address_if_alive()
    elif address not in ("local", "auto"):  # "local" starts a Ray here, "auto" joins this node's
        # a remote cluster from a laptop: ship the project (not the venv or runs) to every node
        env_vars.pop("PYTHONPATH")
        runtime_env["working_dir"] = str(ROOT)
        runtime_env["excludes"] = [".venv", "runs", ".git", "bench/out"]
    own = starts_its_own_ray(address)  # asked once a stale address record is cleared
    if own:  # on a busy machine Ray's own start-up limits (30 s, 15 s) fail the node before it is up
        for name, value in LOCAL_RAY_START_LIMITS.items():
            os.environ.setdefault(name, value)
    if trials_may_wait or not own:
        # Tune restarts every unfinished trial of a restored experiment (and PBT every trial it paused)
        # at once, past the concurrency limit, and on a cluster an autoscaler grows the plan counts
        # nodes not launched yet: either
        # way trials wait for workers. Their wait would end after Ray Train's 60 s start-up timeout
        # (four tries) and error the trial; the resources were checked feasible when the search
        # started, so they wait for the trials ahead, or for the nodes to come up, instead
        env_vars["RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S"] = WORKERS_START_TIMEOUT_S
    shown = tells_progress()  # quiet: Ray's own errors alone, none of its workers' lines
    level = "INFO" if shows_library_output() else "ERROR"
    ray.init(address=address, runtime_env=runtime_env, logging_level=level, log_to_driver=log_to_driver and shown)
    if log_to_driver and shown and not shows_library_output():
        _leave_out_notes_that_are_not_failures()
    if own:
        warn_of_another_ray()
    cluster = {k: float(v) for k, v in ray.cluster_resources().items()}
    node_gpus = [node["Resources"].get("GPU", 0.0) for node in ray.nodes() if node["Alive"]]
    cluster[LARGEST_NODE_GPUS] = float(max(node_gpus, default=0.0))
    return cluster


# What Ray's core (C++) logs at error level from its workers to the console, though nothing failed
RAY_NOTES_THAT_ARE_NOT_FAILURES = (
    # Ray Train's PreemptionWatcher actor, made by every trial's controller: a restart that cannot
    # happen in a search (github.com/ray-project/ray/issues/53727)
    "has constructor arguments in the object store and max_restarts > 0",
)


def _leave_out_notes_that_are_not_failures() -> None:
    """The workers' lines Ray forwards to this console, without ``RAY_NOTES_THAT_ARE_NOT_FAILURES``
    (shown with ``-v``). Ray offers no filter of its own: its forwarding handler is wrapped."""
    from ray._private.ray_logging import global_worker_stdstream_dispatcher as dispatcher

    def kept(forward):
        def forward_kept(batch: dict) -> None:
            lines = [line for line in batch["lines"] if not any(n in line for n in RAY_NOTES_THAT_ARE_NOT_FAILURES)]
            if lines:
                forward({**batch, "lines": lines})

        return forward_kept

    with dispatcher._lock:
        dispatcher.handlers = [(name, kept(h) if name == "ray_print_logs" else h) for name, h in dispatcher.handlers]


def warn_of_another_ray() -> None:
    """One warning when another Ray runs on this machine beside the one this search started: Ray
    Train's placement-group cleaner, which frees a stopped or paused trial's workers, asks for "the"
    Ray of the machine and fails when there are two, so those resources stay held until the search ends."""
    from ray._private.services import find_gcs_addresses

    if len(find_gcs_addresses()) > 1:
        log.warning(
            "doctune: warning: another Ray runs on this machine; trials that stop early or pause (ASHA, PBT) "
            "may then keep their resources until the search ends (Ray Train cannot tell the two apart). "
            "Run one search at a time, or start one Ray (ray start --head) and run both on it.",
        )


def starts_its_own_ray(address: str | None) -> bool:
    """Whether ``ray_init`` will start a Ray on this machine rather than join one."""
    from ray._private.utils import read_ray_address

    address = address or os.environ.get("RAY_ADDRESS")
    if "RAY_JOB_CONFIG_JSON_ENV_VAR" in os.environ:
        return False
    return address == "local" or (address is None and not read_ray_address())
