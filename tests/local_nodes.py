"""Real Ray nodes on this machine for tests of several-node and declared-resource clusters."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

RAY = Path(sys.executable).parent / "ray"


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

    def start_head(self, cpus: int = 1, gpus: int = 0) -> None:
        port = self.address.rsplit(":", 1)[1]
        self._start(
            [str(RAY), "start", "--head", f"--port={port}", f"--num-cpus={cpus}", f"--num-gpus={gpus}",
             "--include-dashboard=false", f"--ray-client-server-port={_free_port()}", *self._agent_ports(),
             "--disable-usage-stats", "--block"]
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

    @staticmethod
    def _agent_ports() -> list[str]:  # the agent's default port is fixed: two nodes on one host clash
        return [f"--dashboard-agent-listen-port={_free_port()}", f"--metrics-export-port={_free_port()}"]

    def stop(self) -> None:
        """The joined nodes first, then the head (a node stopping asks the head to drain it)."""
        head, *joined = self.processes
        for group in (joined, [head]):
            for process in group:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGTERM)
            for process in group:
                try:
                    process.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
