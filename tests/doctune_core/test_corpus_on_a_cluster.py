"""The corpus cache on a Ray cluster of several nodes (``doctune_core.data.corpus.check_every_node_sees``). A
corpus prepared through a run's bucket, which needs no node to see the cache, is prepared so in
tests/test_base_search_on_a_cluster.py, during a search that trains its base on it.

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
from tests.local_nodes import JOINED_DRIVER, LocalNodes

# starts a three-node Ray of its own (its own address) and a search on it
pytestmark = [pytest.mark.ray, pytest.mark.own_ray]

SEEN_BY_EVERY_NODE = (
    JOINED_DRIVER
    + """
from pathlib import Path
from doctune_core.data import DataUnavailable
from doctune_core.data.corpus import check_every_node_sees

try:
    check_every_node_sees(Path(sys.argv[3]))
    print("seen by every node")
except DataUnavailable as refusal:
    print(f"refused: {refusal}")
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
        timeout=600,
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
    done = run_smoke_search(spec, tmp_path / "run", env={**nodes.env, "RAY_ADDRESS": nodes.address}, timeout=600)
    assert done.returncode == 2, done.stderr[-3000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("doctune: error:")]
    assert len(errors) == 1 and "is not seen from node" in errors[0], done.stderr[-3000:]
    assert not (tmp_path / "run").exists() and not list((cache / "corpora").iterdir())
