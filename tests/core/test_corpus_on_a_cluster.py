"""The corpus cache on a Ray cluster of several nodes (``core.data.corpus.check_every_node_sees``), and a
corpus prepared through a run's bucket, which needs no node to see the cache.

Real Ray nodes on this machine: a head, a second node, and a third started in a mount namespace of
its own where a tmpfs hides the cache directory, as a node without the shared file system would be.
Mounting needs root, as the full-disk fault test does.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_smoke_search, spec_variant
from tests.local_nodes import LocalNodes
from tests.servers import s3_server

pytestmark = pytest.mark.ray  # starts a three-node Ray and a search

# A driver of its own process for each question: Ray keeps its settings (the auth mode among
# them) for the life of a process, and the suite's process must keep its own. Each joins the
# cluster at sys.argv[1] once sys.argv[2] nodes are up, then asks its question.
JOINED = """
import sys, time
import ray

address, count = sys.argv[1], int(sys.argv[2])
deadline = time.monotonic() + 240
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

SEEN_BY_EVERY_NODE = (
    JOINED
    + """
from pathlib import Path
from core.data import DataUnavailable
from core.data.corpus import check_every_node_sees

try:
    check_every_node_sees(Path(sys.argv[3]))
    print("seen by every node")
except DataUnavailable as refusal:
    print(f"refused: {refusal}")
"""
)

PREPARED_THROUGH = (
    JOINED
    + """
from core.data import prepare_corpus
from core.run_files import RunFiles

corpus = prepare_corpus(sys.argv[3], through=RunFiles.at(sys.argv[4]))
print(corpus.stats.documents, corpus.directory)
"""
)


def _jsonl_corpus(path: Path, documents: int) -> Path:
    path.write_text(
        "".join(
            json.dumps({"text": f"Document {i} opens here. A second sentence follows."}) + "\n"
            for i in range(documents)
        )
    )
    return path


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

    nodes.add(hiding=[cache])
    answer = _ask_every_node(nodes, 3, cache / "corpora")
    assert re.fullmatch(
        r"refused: the corpus cache .*/cache/corpora is not seen from node .* set DOCTUNE_CACHE.*", answer
    )
    assert not [p.name for p in (cache / "corpora").iterdir()], "the probe files are removed"

    # the search says so once, exits 2 and starts nothing
    source = _jsonl_corpus(tmp_path / "corpus.jsonl", 60)
    spec = spec_variant("smoke", tmp_path, **{"corpus": {"source": str(source)}})
    done = run_smoke_search(spec, tmp_path / "run", env={**nodes.env, "RAY_ADDRESS": nodes.address}, timeout=300)
    assert done.returncode == 2, done.stderr[-3000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("doctune: error:")]
    assert len(errors) == 1 and "is not seen from node" in errors[0], done.stderr[-3000:]
    assert not (tmp_path / "run").exists() and not list((cache / "corpora").iterdir())


def test_a_corpus_prepared_through_a_runs_bucket_needs_no_node_to_see_the_cache(tmp_path):
    """The writers run on the only node with CPUs, which cannot see the cache: their shards reach the
    driver's cache through the bucket, and the bucket keeps nothing of them after."""
    assert os.geteuid() == 0, "this test mounts a tmpfs in a mount namespace and needs root"
    cache, served = tmp_path / "cache", tmp_path / "s3"
    cache.mkdir()
    served.mkdir()
    with s3_server(served) as server:
        server.create_bucket("runs")
        uri = server.uri("runs", "prepared")
        env = {name: value for name, value in os.environ.items() if name != "RAY_ADDRESS"}  # with S3's credentials
        env |= {"DOCTUNE_CACHE": str(cache), "RAY_AUTH_MODE": "disabled", "PYTHONPATH": str(ROOT)}
        cluster = LocalNodes(env)
        cluster.start_head(cpus=0)  # the driver's node runs no writer
        try:
            cluster.add(hiding=[cache], cpus=2)
            source = _jsonl_corpus(tmp_path / "corpus.jsonl", 60)
            done = subprocess.run(
                [sys.executable, "-c", PREPARED_THROUGH, cluster.address, "2", str(source), uri],
                cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
            )  # fmt: skip
        finally:
            cluster.stop()
        assert done.returncode == 0, done.stderr[-3000:]
        documents, directory = done.stdout.strip().splitlines()[-1].split(" ", 1)
        assert int(documents) == 60 and Path(directory).parent == cache / "corpora"
        assert (Path(directory) / "manifest.json").is_file() and list(Path(directory).glob("part-*.parquet"))
        from core.run_files import RunFiles

        assert RunFiles.at(uri).listing() == {}, "the writers' shards are removed from the bucket once fetched"
