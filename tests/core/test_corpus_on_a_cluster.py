"""The corpus cache on a Ray cluster of several nodes (``core.data.corpus.check_every_node_sees``).

Three real Ray nodes on this machine: a head, a second node, and a third started in a mount
namespace of its own where a tmpfs hides the cache directory, as a node without the shared file
system would be. Mounting needs root, as the full-disk fault test does.
"""

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

import pytest

from core.data import DataUnavailable, prepare_corpus
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

    def wait_for(self, count: int, timeout: float = 120) -> None:
        import ray

        deadline = time.monotonic() + timeout
        while sum(node["Alive"] for node in ray.nodes()) < count:
            assert all(p.poll() is None for p in self.processes), "a Ray node exited"
            assert time.monotonic() < deadline, f"{count} Ray nodes did not come up"
            time.sleep(0.5)

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


@pytest.fixture
def nodes(tmp_path, monkeypatch):
    """A Ray head this test drives; ``DOCTUNE_CACHE`` is ``tmp_path/cache``."""
    import ray

    assert os.geteuid() == 0, "this test mounts a tmpfs in a mount namespace and needs root"
    cache = tmp_path / "cache"
    cache.mkdir()
    monkeypatch.setenv("DOCTUNE_CACHE", str(cache))
    # `ray start` turns token auth on, and this process's Ray client, imported before, would not
    # send the token: the test's own throwaway cluster on this machine runs without it
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    monkeypatch.delenv("RAY_ADDRESS")  # the suite's "local": this test addresses its own cluster
    started = LocalNodes(dict(os.environ))
    started.start_head()
    try:
        deadline = time.monotonic() + 120
        while True:  # the head's GCS takes a moment to listen
            try:
                ray.init(address=started.address, log_to_driver=False, logging_level="ERROR")
                break
            except ConnectionError:
                assert time.monotonic() < deadline, "the Ray head did not come up"
                time.sleep(1)
        yield started
    finally:
        ray.shutdown()
        started.stop()


def test_a_cache_some_node_cannot_see_is_refused_naming_the_node(nodes, tmp_path):
    source = tmp_path / "corpus.jsonl"
    source.write_text(
        "".join(json.dumps({"text": f"Document {i} opens here. A second sentence follows."}) + "\n" for i in range(60))
    )
    cache = Path(os.environ["DOCTUNE_CACHE"])

    nodes.add()
    nodes.wait_for(2)
    prepared = prepare_corpus(str(source))  # both nodes see the cache
    assert prepared.stats.documents == 60 and prepared.stats.sentences == 120

    nodes.add(hiding=cache)
    nodes.wait_for(3)
    refusal = r"corpus cache .*/cache/corpora is not seen from node .* set DOCTUNE_CACHE"
    with pytest.raises(DataUnavailable, match=refusal):
        prepare_corpus(str(source))  # a prepared corpus, too, is refused: that node's workers could not read it
    assert [p.name for p in (cache / "corpora").iterdir() if p.name.startswith(".seen-by")] == []

    # the search says so once, exits 2 and starts nothing
    spec = spec_variant("smoke", tmp_path, **{"corpus": {"source": str(source)}})
    done = subprocess.run(
        [sys.executable, "-m", "platform.search", spec, "--profile", "smoke", "--run-dir", str(tmp_path / "run")],
        cwd=ROOT,
        env={**os.environ, "RAY_ADDRESS": nodes.address},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2, done.stderr[-3000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("doctune: error:")]
    assert len(errors) == 1 and "is not seen from node" in errors[0], done.stderr[-3000:]
    assert not (tmp_path / "run").exists()
