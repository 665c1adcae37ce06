"""Real Ray nodes on this machine for tests of several-node and declared-resource clusters."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

RAY = Path(sys.executable).parent / "ray"
CHECKOUT = Path(__file__).resolve().parent.parent
NODES = """
import json, sys, time
import ray
deadline = time.monotonic() + 300
while True:  # the head's GCS takes a moment to listen (longer on a loaded machine)
    try:
        ray.init(sys.argv[1], logging_level="ERROR")
        break
    except ConnectionError:
        assert time.monotonic() < deadline, "the head did not come up"
        time.sleep(1)
print("NODES", json.dumps([{"id": n["NodeID"], "alive": n["Alive"], "resources": n["Resources"]} for n in ray.nodes()]))
"""

ACTORS = """
import json, sys
import ray
from ray.util.state import list_actors
ray.init(sys.argv[1], logging_level="ERROR")
# the address given: left out, the state API asks the cluster `ray start --head` recorded last on this
# host (/tmp/ray/ray_current_cluster), which need not be this one
actors = list_actors(address=sys.argv[1], limit=10_000, raise_on_missing_output=False)
print("ACTORS", json.dumps([{"class": a.class_name, "node": a.node_id, "state": a.state} for a in actors]))
"""


# A driver of its own process for each question: Ray keeps its settings (the auth mode among
# them) for the life of a process, and the suite's process must keep its own. Each joins the
# cluster at sys.argv[1] once sys.argv[2] nodes are up, then does what a script appended to this asks.
JOINED_DRIVER = """
import sys, time
import ray

address, count = sys.argv[1], int(sys.argv[2])
deadline = time.monotonic() + 480
while True:  # a loaded machine's head may answer late, or time out the first driver that joins
    try:
        ray.init(address=address, log_to_driver=False, logging_level="ERROR")
        break
    except Exception:
        assert time.monotonic() < deadline, "the Ray head did not come up"
        time.sleep(1)
while sum(node["Alive"] for node in ray.nodes()) < count:
    assert time.monotonic() < deadline, f"{count} Ray nodes did not come up"
    time.sleep(0.5)
"""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class LocalNodes:
    """Ray nodes started with ``ray start --block``, each in a process group of its own, so that
    stopping them touches no other Ray on this machine (``ray stop`` would). Each node declares the
    CPUs and GPUs it is given (GPUs declared, not present: enough to plan on, not to train on)."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env, self.processes = env, []
        self.address = f"127.0.0.1:{_free_port()}"

    def _start(self, command: list[str]) -> None:
        # no drain on SIGTERM: Ray's (for Serve's replicas) waits up to 30 s on any worker lease still
        # held, as a killed driver's or a finished search's may be, and these nodes serve nothing
        env = self.env | {"RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0"}
        self.processes.append(subprocess.Popen(command, env=env, start_new_session=True))

    def start_head(
        self, cpus: int = 1, gpus: int = 0, autoscaling_config: Path | None = None, dashboard: bool = False
    ) -> None:
        """The head; with ``autoscaling_config``, one whose autoscaler launches the nodes it names
        (its provider ``fake_multinode``: they start as processes of the autoscaler, in this group);
        with ``dashboard``, one that serves Ray's state API (``actors``)."""
        port = self.address.rsplit(":", 1)[1]
        autoscaling = [f"--autoscaling-config={autoscaling_config}"] if autoscaling_config else []
        serving = [f"--dashboard-port={_free_port()}"] if dashboard else ["--include-dashboard=false"]
        self._start(
            [str(RAY), "start", "--head", f"--port={port}", f"--num-cpus={cpus}", f"--num-gpus={gpus}",
             *serving, f"--ray-client-server-port={_free_port()}", *self._agent_ports(),
             *autoscaling, "--disable-usage-stats", "--block"]
        )  # fmt: skip

    def add(self, hiding: Sequence[Path] = (), cpus: int = 1, gpus: int = 0) -> None:
        """A node that joins the head; with ``hiding``, one in a mount namespace of its own that sees
        an empty tmpfs over each of those directories instead (over ``/tmp``, its Ray temp directory
        ``/tmp/ray`` is its own too)."""
        for path in hiding:  # the node runs this environment's `ray` on this checkout's code
            for what, where in (("the Python environment", Path(sys.prefix)), ("the checkout", CHECKOUT)):
                assert not where.is_relative_to(path), (
                    f"a node that hides {path} cannot see {what} at {where}: run the tests from outside {path}"
                )
        command = [str(RAY), "start", f"--address={self.address}", f"--num-cpus={cpus}", f"--num-gpus={gpus}",
                   *self._agent_ports(), "--disable-usage-stats", "--block"]  # fmt: skip
        if hiding:
            mounts = " && ".join(f"mount -t tmpfs tmpfs {shlex.quote(str(path))}" for path in hiding)
            command = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                       f"{mounts} && exec {shlex.join(command)}"]  # fmt: skip
        self._start(command)

    def nodes(self) -> list[dict]:
        """Every node the cluster has known (``id``, ``alive``, ``resources``), read by a driver of its own."""
        done = subprocess.run(
            [sys.executable, "-c", NODES, self.address], env=self.env, capture_output=True, text=True, timeout=180
        )
        assert done.returncode == 0, done.stderr[-3000:]
        (line,) = [line for line in done.stdout.splitlines() if line.startswith("NODES ")]
        return json.loads(line.removeprefix("NODES "))

    def actors(self) -> list[dict]:
        """Every actor the cluster has run, alive or dead (``class``, ``node``: its node's id,
        ``state``), from Ray's state API (a head started with ``dashboard``)."""
        done = subprocess.run(
            [sys.executable, "-c", ACTORS, self.address], env=self.env, capture_output=True, text=True, timeout=180
        )
        assert done.returncode == 0, done.stderr[-3000:]
        (line,) = [line for line in done.stdout.splitlines() if line.startswith("ACTORS ")]
        return json.loads(line.removeprefix("ACTORS "))

    def seen_by(self, node: int, path: Path) -> Path:
        """``path`` as the ``node``-th started node (0: the head) sees it, readable from here (the node's
        mount namespace's root, ``/proc/PID/root``)."""
        return Path(f"/proc/{self.processes[node].pid}/root") / path.relative_to("/")

    def wait_until_alive(self, count: int, timeout_s: float = 300) -> list[dict]:
        deadline = time.monotonic() + timeout_s
        while True:
            found = self.nodes()
            if sum(node["alive"] for node in found) >= count:
                return found
            assert time.monotonic() < deadline, f"{count} Ray nodes did not come up: {found}"
            time.sleep(1)

    @staticmethod
    def _agent_ports() -> list[str]:  # the agent's default port is fixed: two nodes on one host clash
        return [f"--dashboard-agent-listen-port={_free_port()}", f"--metrics-export-port={_free_port()}"]

    def stop(self) -> None:
        """The joined nodes first, then the head. Only ``ray start`` itself is asked to stop: it stops
        its node's processes (with no drain: ``_start``); whatever of the group is left after is
        killed."""
        head, *joined = self.processes
        for group in (joined, [head]):
            for process in group:
                with contextlib.suppress(ProcessLookupError):
                    process.send_signal(signal.SIGTERM)
            for process in group:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(timeout=60)
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
