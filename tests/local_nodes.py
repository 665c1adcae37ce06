"""Real Ray nodes on this machine for tests of several-node and declared-resource clusters."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

RAY = Path(sys.executable).parent / "ray"
NODES = """
import json, sys, time
import ray
deadline = time.monotonic() + 120
while True:  # the head's GCS takes a moment to listen
    try:
        ray.init(sys.argv[1], logging_level="ERROR")
        break
    except ConnectionError:
        assert time.monotonic() < deadline, "the head did not come up"
        time.sleep(1)
print("NODES", json.dumps([{"id": n["NodeID"], "alive": n["Alive"], "resources": n["Resources"]} for n in ray.nodes()]))
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
        self.processes.append(subprocess.Popen(command, env=self.env, start_new_session=True))

    def start_head(self, cpus: int = 1, gpus: int = 0, autoscaling_config: Path | None = None) -> None:
        """The head; with ``autoscaling_config``, one whose autoscaler launches the nodes it names
        (its provider ``fake_multinode``: they start as processes of the autoscaler, in this group)."""
        port = self.address.rsplit(":", 1)[1]
        autoscaling = [f"--autoscaling-config={autoscaling_config}"] if autoscaling_config else []
        self._start(
            [str(RAY), "start", "--head", f"--port={port}", f"--num-cpus={cpus}", f"--num-gpus={gpus}",
             "--include-dashboard=false", f"--ray-client-server-port={_free_port()}", *self._agent_ports(),
             *autoscaling, "--disable-usage-stats", "--block"]
        )  # fmt: skip

    def add(self, hiding: Path | None = None, cpus: int = 1, gpus: int = 0) -> None:
        """A node that joins the head; with ``hiding``, one that sees an empty tmpfs there instead."""
        command = [str(RAY), "start", f"--address={self.address}", f"--num-cpus={cpus}", f"--num-gpus={gpus}",
                   *self._agent_ports(), "--disable-usage-stats", "--block"]  # fmt: skip
        if hiding is not None:
            joined = " ".join(command)
            command = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                       f"mount -t tmpfs tmpfs {hiding} && exec {joined}"]  # fmt: skip
        self._start(command)

    def nodes(self) -> list[dict]:
        """Every node the cluster has known (``id``, ``alive``, ``resources``), read by a driver of its own."""
        done = subprocess.run(
            [sys.executable, "-c", NODES, self.address], env=self.env, capture_output=True, text=True, timeout=180
        )
        assert done.returncode == 0, done.stderr[-3000:]
        (line,) = [line for line in done.stdout.splitlines() if line.startswith("NODES ")]
        return json.loads(line.removeprefix("NODES "))

    def wait_until_alive(self, count: int, timeout_s: float = 120) -> list[dict]:
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
        """The joined nodes first, then the head (a node stopping asks the head to drain it). Only
        ``ray start`` itself is asked to stop: it drains its node and stops the node's processes (a
        signal to the whole group would stop the head's GCS under it, and the drain would wait 30 s
        for it); whatever of the group is left after is killed."""
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
