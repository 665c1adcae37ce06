"""The base stage on a Ray cluster whose only node with CPUs does not see the driver's cache: the
corpus it trains on is prepared through a run's bucket (``prepare_corpus(..., through=files)``), its
work goes through the bucket too (``trainers.base_stage.staging``), and a stage killed mid-training
resumes on fresh nodes from the bucket alone, which keeps nothing of either after.

Real Ray nodes on this machine: a head that declares no CPU and a node in a mount namespace of its
own where a tmpfs hides the cache directory; a real S3-compatible server (moto). Mounting needs
root, as the corpus-on-a-cluster test does.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from doctune_core.data import PreparedCorpus, prepare_corpus
from doctune_core.run_files import RunFiles
from tests.conftest import ROOT
from tests.local_nodes import JOINED_DRIVER, LocalNodes
from tests.servers import s3_server
from tests.trainers.test_base_stage import TINY

pytestmark = pytest.mark.ray  # starts two-node Ray clusters

# the base stage test's tiny BERT, for fewer steps: a checkpoint at 20, then the resumed attempt's 20
SHORT = dataclasses.replace(TINY, steps=40)

STAGE = (
    JOINED_DRIVER
    + """
import json
from doctune_core.data import prepare_corpus
from doctune_core.run_files import RunFiles
from trainers.base_stage import ensure_base
from trainers.config import BaseSettings

files = RunFiles.at(sys.argv[4])
corpus = prepare_corpus(sys.argv[3], through=files)
built = ensure_base(BaseSettings(**json.loads(sys.argv[5])), corpus.directory, "news", workers=2,
                    cpus_per_worker=0.5, max_worker_failures=0, through=files)
print(built.path)
"""
)
CHECKPOINT_IN_THE_BUCKET = re.compile(r"base-stage/[0-9a-f]+/checkpoints/(step_\d+)/\.whole")


@contextlib.contextmanager
def _cluster(env: dict[str, str], cache: Path) -> Iterator[LocalNodes]:
    """A head with no CPU, and a node with two that does not see ``cache``."""
    nodes = LocalNodes(env)
    try:
        nodes.start_head(cpus=0)
        nodes.add(hiding=[cache], cpus=2)
        yield nodes
    finally:
        nodes.stop()


def _stage(nodes: LocalNodes, source: Path, uri: str, **popen) -> subprocess.Popen:
    command = [sys.executable, "-c", STAGE, nodes.address, "2", str(source), uri, json.dumps(dataclasses.asdict(SHORT))]
    return subprocess.Popen(command, cwd=ROOT, env=nodes.env, start_new_session=True, text=True, **popen)


def _checkpoints_in(files: RunFiles) -> list[str]:
    return sorted(m.group(1) for name in files.listing() if (m := CHECKPOINT_IN_THE_BUCKET.fullmatch(name)))


def test_a_corpus_and_a_base_made_through_a_runs_bucket_resume_on_fresh_nodes_from_the_bucket_alone(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    assert os.geteuid() == 0, "this test mounts a tmpfs in a mount namespace and needs root"
    # real news text, as a JSON-lines source the node reads where it is (only the cache is hidden)
    source = tmp_path / "news.jsonl"
    documents = PreparedCorpus.load(prepare_corpus("news-articles", max_documents=200).directory).documents()
    source.write_text("".join(json.dumps({"text": " ".join(sentences)}) + "\n" for sentences in documents))
    cache, served = tmp_path / "cache", tmp_path / "s3"
    cache.mkdir()
    served.mkdir()
    with s3_server(served) as server:
        server.create_bucket("runs")
        uri = server.uri("runs", "base")
        files = RunFiles.at(uri)
        env = {name: value for name, value in os.environ.items() if name != "RAY_ADDRESS"}  # with S3's credentials
        env |= {"DOCTUNE_CACHE": str(cache), "RAY_AUTH_MODE": "disabled", "PYTHONPATH": str(ROOT)}
        env |= {"RAY_TRAIN_HEALTH_CHECK_INTERVAL_S": "0.5", "TOKENIZERS_PARALLELISM": "false"}
        with _cluster(env, cache) as nodes:
            first = _stage(nodes, source, uri, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                deadline = time.monotonic() + 300
                while not _checkpoints_in(files):
                    assert first.poll() is None, "the stage ended before its first checkpoint reached the bucket"
                    assert time.monotonic() < deadline, "no checkpoint reached the bucket within 300 s"
                    time.sleep(0.5)
            finally:
                os.killpg(first.pid, 9)
                first.wait()
        (left,) = _checkpoints_in(files)  # the latest only
        # the corpus's writers ran on the node that cannot see the cache: their shards came through the bucket
        (manifest,) = (cache / "corpora").glob("*/manifest.json")
        assert list(manifest.parent.glob("part-*.parquet"))
        assert not [name for name in files.listing() if not name.startswith("base-stage/")]
        (work,) = (cache / "bases").glob("*.partial")
        assert not (work / "checkpoints").exists(), "the workers checkpoint on their node, not the driver's"
        shutil.rmtree(work)  # the driver keeps nothing of the killed attempt: the bucket alone has it

        with _cluster(env, cache) as nodes:
            resumed = _stage(nodes, source, uri, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            out, err = resumed.communicate(timeout=600)
        assert resumed.returncode == 0, err[-3000:]
        entry = Path(out.strip().splitlines()[-1])
        assert entry.parent == cache / "bases" and (entry / "model.safetensors").is_file()
        assert not list((cache / "bases").glob("*.partial"))
        assert files.listing() == {}, "the bucket keeps nothing of the corpus or the stage"

    record = json.loads((entry / "doctune.json").read_text())
    assert record["step"] == SHORT.steps and record["kind"] == "vanilla-base"
    every = SHORT.steps // 10  # the loop's log interval in a run of under 100 steps
    assert [step for step, _ in record["loss_curve"]] == list(range(every, SHORT.steps + 1, every))
    first_logged = []
    for event_file in sorted((entry / "tensorboard").glob("events.*")):  # one per attempt, by creation time
        scalars = EventAccumulator(str(event_file))
        scalars.Reload()
        first_logged.append(scalars.Scalars("base/mlm_loss")[0].step)
    assert first_logged == [every, int(left.split("_")[-1]) + every]  # the second attempt went on from the bucket's
