"""A search that trains its own base (``base:``) on a cluster with no shared directory, killed in its
base stage and resumed from its bucket alone: the two-node set-up of the smoke module
(tests/test_search_smoke.py) for what a bucket must carry besides the trials.

The search prepares its corpus during the search, through the run's bucket (Ray Data's writers run
on a node that cannot see the driver's cache); its base stage trains there too, its checkpoints in
the bucket. It is killed with SIGKILL once the stage's first checkpoint is in the bucket, both nodes
are stopped, and the driver's run directory and the stage's work in its cache are deleted;
``--resume`` on two fresh nodes goes on from the bucket's checkpoint, trains the trial on the base
and leaves nothing of the stage or the corpus's preparation in the bucket.

Real Ray nodes on this machine: a head that declares no CPU and a node in a mount namespace of its
own where a tmpfs hides the driver's directory (its cache and its run directory); a real
S3-compatible server (moto). Mounting needs root, as the smoke module's second node does.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from doctune_core.data import PreparedCorpus, prepare_corpus
from doctune_core.run_files import RunFiles
from tests.conftest import FEW_ITEMS, ROOT, smoke_search_command, spec_variant, trial_rows
from tests.local_nodes import LocalNodes
from tests.servers import s3_server

pytestmark = pytest.mark.ray  # starts two-node Ray clusters and runs a search on them

BASE_STEPS, CHECKPOINT_EVERY = 40, 20  # the smoke profile's base, trained long enough to be killed in
CHECKPOINT_IN_THE_BUCKET = re.compile(r"base-stage/[0-9a-f]+/checkpoints/(step_\d+)/\.whole")


@contextlib.contextmanager
def _cluster(env: dict[str, str], hidden: Path) -> Iterator[LocalNodes]:
    """A head with no CPU, and a node with two that sees an empty directory at ``hidden``."""
    nodes = LocalNodes(env)
    try:
        nodes.start_head(cpus=0)
        nodes.add(hiding=[hidden], cpus=2)
        nodes.wait_until_alive(2)
        yield nodes
    finally:
        nodes.stop()


def _checkpoints_in(files: RunFiles) -> list[str]:
    return sorted(m.group(1) for name in files.listing() if (m := CHECKPOINT_IN_THE_BUCKET.fullmatch(name)))


def test_a_search_with_a_base_stage_resumes_on_fresh_nodes_from_its_bucket_alone(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    assert os.geteuid() == 0, "this test mounts a tmpfs in a mount namespace and needs root"
    # real news text, as a JSON-lines source every node reads where it is (a bucket's, in a real cluster)
    source = tmp_path / "source" / "news.jsonl"
    source.parent.mkdir()
    documents = PreparedCorpus.load(prepare_corpus("news-articles", max_documents=200).directory).documents()
    source.write_text("".join(json.dumps({"text": " ".join(sentences)}) + "\n" for sentences in documents))
    driver = tmp_path / "driver"  # the driver's own: its cache and its run directory, hidden from the node
    cache, run_dir = driver / "cache", driver / "run"
    cache.mkdir(parents=True)
    # the recipe study's spec searched on its own: a vanilla base, then one trial of the SimCSE row
    spec = spec_variant(
        "seed_study",
        tmp_path,
        **{
            "corpus": {"source": str(source)},
            "base.steps": BASE_STEPS,
            "base.checkpoint_every": CHECKPOINT_EVERY,
            "search.samples": 1,
            "train.workers": 1,
            "evaluation.limits": FEW_ITEMS,
        },
    )
    (tmp_path / "s3").mkdir()
    with s3_server(tmp_path / "s3") as server:
        server.create_bucket("runs")
        uri = server.uri("runs", "base-search")
        files = RunFiles.at(uri)
        command = [*smoke_search_command(spec, run_dir), "--storage", uri]
        env = {name: value for name, value in os.environ.items() if name != "RAY_ADDRESS"}  # with S3's credentials
        env |= {"DOCTUNE_CACHE": str(cache), "RAY_AUTH_MODE": "disabled", "PYTHONPATH": str(ROOT)}
        env |= {"RAY_TRAIN_HEALTH_CHECK_INTERVAL_S": "0.5", "TOKENIZERS_PARALLELISM": "false"}
        with _cluster(env, driver) as nodes:
            env["RAY_ADDRESS"] = nodes.address
            first = subprocess.Popen(
                command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
            )
            try:
                deadline = time.monotonic() + 420
                while not (_checkpoints_in(files) and files.is_file("search.json")):
                    assert first.poll() is None, "the search ended before its base stage's first checkpoint"
                    assert time.monotonic() < deadline, "no base-stage checkpoint reached the bucket within 420 s"
                    time.sleep(0.5)
            finally:
                os.killpg(first.pid, signal.SIGKILL)
                first.wait()
        (left,) = _checkpoints_in(files)
        assert left == f"step_{CHECKPOINT_EVERY:06d}"
        # the corpus was prepared during the search by writers on the node that cannot see the cache:
        # its shards came through the bucket into the driver's cache
        (manifest,) = (cache / "corpora").glob("*/manifest.json")
        assert list(manifest.parent.glob("part-*.parquet"))
        (work,) = (cache / "bases").glob("*.partial")
        assert not (work / "checkpoints").exists(), "the stage's workers checkpoint on their node, not the driver's"
        for gone in (work, run_dir):  # the driver keeps nothing of the killed search: the bucket alone has it
            shutil.rmtree(gone)

        with _cluster(env, driver) as nodes:
            env["RAY_ADDRESS"] = nodes.address
            done = subprocess.run(
                [*command, "--resume"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900
            )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        assert f"doctune: fetched the run's records from {uri} into {run_dir}" in done.stdout
        left_in_the_bucket = [n for n in files.listing() if n.startswith(("base-stage/", ".preparing"))]
        assert not left_in_the_bucket, "the bucket keeps nothing of the stage or the corpus's preparation"

    rows = json.loads((run_dir / "leaderboard.json").read_text())["rows"]
    (trial,) = trial_rows(rows)
    assert trial["status"] == "completed" and any(r["trial"].startswith("baseline") for r in rows)
    (entry,) = [path for path in (cache / "bases").iterdir() if path.is_dir()]  # no <digest>.partial left
    assert (entry / "model.safetensors").is_file()
    record = json.loads((entry / "doctune.json").read_text())
    assert record["step"] == BASE_STEPS and record["kind"] == "vanilla-base"
    every = BASE_STEPS // 10  # the loop's log interval in a run of under 100 steps
    assert [step for step, _ in record["loss_curve"]] == list(range(every, BASE_STEPS + 1, every))
    first_logged = []
    for event_file in sorted((entry / "tensorboard").glob("events.*")):  # one per attempt, by creation time
        scalars = EventAccumulator(str(event_file))
        scalars.Reload()
        first_logged.append(scalars.Scalars("base/mlm_loss")[0].step)
    assert first_logged == [every, CHECKPOINT_EVERY + every]  # the second attempt went on from the bucket's
    assert json.loads((run_dir / "search.json").read_text())["resolved_spec"]["base"]["steps"] == BASE_STEPS
