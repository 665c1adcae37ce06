"""The corpus cache on a Ray cluster of several nodes (``core.data.corpus.check_every_node_sees``).

Three real Ray nodes on this machine: a head, a second node, and a third started in a mount
namespace of its own where a tmpfs hides the cache directory, as a node without the shared file
system would be. Mounting needs root, as the full-disk fault test does.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, spec_variant

pytestmark = pytest.mark.slow  # starts a three-node Ray and a search

RAY = Path(sys.executable).parent / "ray"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class LocalNodes:
    """Ray nodes started with ``ray start --block``, each in a process group of its own, so that
    stopping them touches no other Ray on this machine (``ray stop`` would)."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env, self.processes = env, []
        self.address = f"127.0.0.1:{_free_port()}"

    def _start(self, command: list[str]) -> None:
        self.processes.append(subprocess.Popen(command, env=self.env, start_new_session=True))

    def start_head(self) -> None:
        port = self.address.rsplit(":", 1)[1]
        self._start(
            [str(RAY), "start", "--head", f"--port={port}", "--num-cpus=1", "--include-dashboard=false",
             f"--ray-client-server-port={_free_port()}", *self._agent_ports(), "--disable-usage-stats", "--block"]
        )  # fmt: skip

    def add(self, hiding: Path | None = None) -> None:
        """A node that joins the head; with ``hiding``, one that sees an empty tmpfs there instead."""
        command = [str(RAY), "start", f"--address={self.address}", "--num-cpus=1", *self._agent_ports(),
                   "--disable-usage-stats", "--block"]  # fmt: skip
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


# A driver of its own process for each question: Ray keeps its settings (the auth mode among
# them) for the life of a process, and the suite's process must keep its own.
SEEN_BY_EVERY_NODE = """
import sys, time
from pathlib import Path
import ray
from core.data import DataUnavailable
from core.data.corpus import check_every_node_sees

address, count, directory = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
deadline = time.monotonic() + 120
while True:  # the head's GCS takes a moment to listen
    try:
        ray.init(address=address, log_to_driver=False, logging_level="ERROR")
        break
    except ConnectionError:
        assert time.monotonic() < deadline, "the Ray head did not come up"
        time.sleep(1)
while sum(node["Alive"] for node in ray.nodes()) < count:
    assert time.monotonic() < deadline, f"{count} Ray nodes did not come up"
    time.sleep(0.5)
try:
    check_every_node_sees(directory)
    print("seen by every node")
except DataUnavailable as refusal:
    print(f"refused: {refusal}")
"""


@pytest.fixture
def nodes(tmp_path):
    """A Ray head on this machine; its processes and this test's drivers use ``tmp_path/cache``."""
    assert os.geteuid() == 0, "this test mounts a tmpfs in a mount namespace and needs root"
    (tmp_path / "cache").mkdir()
    env = {name: value for name, value in os.environ.items() if name != "RAY_ADDRESS"}  # the suite's "local"
    # `ray start` turns token auth on by default; this throwaway cluster on one machine runs without
    env |= {"DOCTUNE_CACHE": str(tmp_path / "cache"), "RAY_AUTH_MODE": "disabled", "PYTHONPATH": str(ROOT)}
    started = LocalNodes(env)
    started.start_head()
    try:
        yield started
    finally:
        started.stop()


def _ask_every_node(nodes: LocalNodes, count: int, directory: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-c", SEEN_BY_EVERY_NODE, nodes.address, str(count), str(directory)],
        cwd=ROOT,
        env=nodes.env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


def test_a_cache_some_node_cannot_see_is_refused_naming_the_node(nodes, tmp_path):
    cache = tmp_path / "cache"
    nodes.add()
    assert _ask_every_node(nodes, 2, cache / "corpora") == "seen by every node"

    nodes.add(hiding=cache)
    answer = _ask_every_node(nodes, 3, cache / "corpora")
    assert re.fullmatch(
        r"refused: the corpus cache .*/cache/corpora is not seen from node .* set DOCTUNE_CACHE.*", answer
    )
    assert not [p.name for p in (cache / "corpora").iterdir()], "the probe files are removed"

    # the search says so once, exits 2 and starts nothing
    source = tmp_path / "corpus.jsonl"
    source.write_text(
        "".join(json.dumps({"text": f"Document {i} opens here. A second sentence follows."}) + "\n" for i in range(60))
    )
    spec = spec_variant("smoke", tmp_path, **{"corpus": {"source": str(source)}})
    done = subprocess.run(
        [sys.executable, "-m", "platform.search", spec, "--profile", "smoke", "--run-dir", str(tmp_path / "run")],
        cwd=ROOT,
        env={**nodes.env, "RAY_ADDRESS": nodes.address},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2, done.stderr[-3000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("doctune: error:")]
    assert len(errors) == 1 and "is not seen from node" in errors[0], done.stderr[-3000:]
    assert not (tmp_path / "run").exists() and not list((cache / "corpora").iterdir())
