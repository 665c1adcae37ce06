"""The base stage on a real local Ray: a tiny vanilla BERT trained from scratch on real news text,
interrupted and resumed, cached, and reused without training."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from doctune_core.data import prepare_corpus
from tests.conftest import ROOT
from trainers.base_stage import base_digest, base_entry, ensure_base, pack_blocks
from trainers.checkpoint import latest_step_dir
from trainers.config import BaseSettings

# 2 layers, hidden 32, a 500-word vocabulary: a real BERT, trained in seconds
TINY = BaseSettings(
    layers=2,
    hidden=32,
    heads=2,
    intermediate=64,
    vocab_size=500,
    max_length=64,
    steps=100,
    lr=3e-3,
    batch_size=8,
    checkpoint_every=20,
)
ENV = {"PYTHONPATH": str(ROOT), "RAY_TRAIN_HEALTH_CHECK_INTERVAL_S": "0.5", "TOKENIZERS_PARALLELISM": "false"}

# What the test runs in a child process, to kill it mid-training: the stage alone, on its own Ray.
CHILD = """
import json, sys
from pathlib import Path
import ray
from trainers.base_stage import ensure_base
from trainers.config import BaseSettings
ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
         runtime_env={"env_vars": json.loads(sys.argv[4])})
ensure_base(BaseSettings(**json.loads(sys.argv[1])), sys.argv[2], "news-articles",
            workers=2, cpus_per_worker=0.5, max_worker_failures=0, cache=Path(sys.argv[3]))
"""


@pytest.fixture(scope="module")
def corpus() -> Path:
    return prepare_corpus("news-articles", max_documents=200).directory


@pytest.fixture(scope="module")
def local_ray():
    ray = pytest.importorskip("ray")
    os.environ.update({k: v for k, v in ENV.items() if k != "PYTHONPATH"})
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": ENV})
    try:
        yield ray
    finally:
        ray.shutdown()


def _kill_after_first_checkpoint(corpus: Path, cache: Path) -> Path:
    """Start the stage in a child process and SIGKILL it and every process under it (its Ray and
    the Train workers) once its first checkpoint is written; returns the work directory it left."""
    import psutil

    work = base_entry(TINY, corpus, cache).with_name(base_digest(TINY, corpus) + ".partial")
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, json.dumps(dataclasses.asdict(TINY)), str(corpus), str(cache), json.dumps(ENV)],
        cwd=ROOT,
        env={**os.environ, **ENV},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while latest_step_dir(work / "checkpoints") is None:
            assert child.poll() is None, "the child stage ended before its first checkpoint"
            assert time.monotonic() < deadline, "no checkpoint within 120 s"
            time.sleep(0.02)
    finally:
        parent = psutil.Process(child.pid)
        for process in [*parent.children(recursive=True), parent]:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()
        child.wait()
    return work


@pytest.fixture(scope="module")
def built(corpus, tmp_path_factory):
    """A base whose first attempt was killed mid-training, then finished by a second attempt."""
    cache = tmp_path_factory.mktemp("cache")
    work = _kill_after_first_checkpoint(corpus, cache)
    entry = base_entry(TINY, corpus, cache)
    latest = latest_step_dir(work / "checkpoints")
    left = {"entry_exists": entry.exists(), "latest_step": int(latest.name.split("_")[-1]) if latest else None}
    run_dir = tmp_path_factory.mktemp("run")
    return entry, left, cache, run_dir


@pytest.fixture()
def finished(built, corpus, local_ray):
    """The base's entry, finished: by the resuming test when it ran (then from the cache), else now."""
    entry, _, cache, _ = built
    ensure_base(TINY, corpus, "news-articles", workers=2, cpus_per_worker=0.5, cache=cache)
    assert entry.is_dir()
    return entry


@pytest.mark.ray  # starts Ray
def test_a_killed_stage_leaves_no_entry_and_the_next_attempt_resumes_and_trains_the_model(built, corpus, local_ray):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    entry, left, cache, run_dir = built
    assert not left["entry_exists"], "a killed stage must not leave an entry that looks complete"
    assert left["latest_step"] is not None and left["latest_step"] < TINY.steps

    result = ensure_base(
        TINY,
        corpus,
        "news-articles",
        workers=2,
        cpus_per_worker=0.5,
        max_worker_failures=0,
        cache=cache,
        logs_to=run_dir,
    )
    assert result.trained and result.path == entry and result.digest == entry.name
    assert not entry.with_name(entry.name + ".partial").exists()
    assert {"config.json", "model.safetensors", "tokenizer.json", "doctune.json"} <= {p.name for p in entry.iterdir()}
    assert not (entry / "training_state").exists()

    record = json.loads((entry / "doctune.json").read_text())
    assert record["kind"] == "vanilla-base" and record["step"] == TINY.steps and record["vocab_size"] == 500
    losses = [loss for _, loss in record["loss_curve"]]
    assert [step for step, _ in record["loss_curve"]] == list(range(10, TINY.steps + 1, 10))
    assert losses[0] > 5.5 and losses[-1] < losses[0] - 0.3, losses  # from about ln(500) = 6.2, down
    events = sorted((entry / "tensorboard").glob("events.*"))  # by creation time
    assert len(events) == 2, "one event file per attempt: the killed one and the one that resumed"
    first_logged = []
    for event_file in events:
        scalars = EventAccumulator(str(event_file))
        scalars.Reload()
        assert {"base/mlm_loss", "base/lr", "base/tokens_per_s"} <= set(scalars.Tags()["scalars"])
        first_logged.append(scalars.Scalars("base/mlm_loss")[0].step)
    assert first_logged == [10, left["latest_step"] + 10]  # the second attempt went on from the checkpoint
    assert sorted(p.name for p in (run_dir / "tensorboard").glob("events.*")) == [p.name for p in events]


@pytest.mark.ray  # needs the stage trained on Ray
def test_the_base_loads_as_an_ordinary_hugging_face_model(finished):
    import torch
    from transformers import AutoModel, AutoModelForMaskedLM, AutoTokenizer

    from doctune_core.encoder import embed_texts, load_encoder

    entry = finished
    model, tokenizer = load_encoder(str(entry))
    assert (model.config.num_hidden_layers, model.config.hidden_size, len(tokenizer)) == (2, 32, 500)
    texts = ["Stocks fell on Monday.", "The senate voted."]
    vectors = embed_texts(model, tokenizer, texts, pooling="mean", max_length=64)
    assert vectors.shape == (2, 32) and float(abs(vectors[0] @ vectors[1])) < 0.9999
    assert tokenizer.decode(tokenizer("Stocks fell")["input_ids"]) == "[CLS] stocks fell [SEP]"

    mlm, info = AutoModelForMaskedLM.from_pretrained(entry, output_loading_info=True)
    assert info["missing_keys"] == [] or info["missing_keys"] == set(), info  # the MLM head was trained and saved
    auto = AutoModel.from_pretrained(entry)
    text = AutoTokenizer.from_pretrained(entry)(["a text"], return_tensors="pt")
    with torch.no_grad():
        assert torch.isfinite(auto(**text).last_hidden_state).all() and torch.isfinite(mlm(**text).logits).all()


@pytest.mark.ray  # starts Ray
def test_the_same_settings_reuse_the_cache_without_training(finished, built, corpus, local_ray):
    entry, _, cache, _ = built
    before = {p: p.stat().st_mtime_ns for p in cache.rglob("*")}
    checkpointing_differs = dataclasses.replace(TINY, checkpoint_every=50)  # not part of the key
    for settings in (TINY, checkpointing_differs):
        again = ensure_base(settings, corpus, "news-articles", workers=2, cpus_per_worker=0.5, cache=cache)
        assert not again.trained and again.path == entry
    after = {p: p.stat().st_mtime_ns for p in cache.rglob("*")}
    assert after == before  # no work directory, no Ray Train storage, no rewritten file


KEY_CHANGES = {
    "layers": 3,
    "hidden": 64,
    "heads": 4,
    "intermediate": 128,
    "vocab_size": 600,
    "lowercase": False,
    "max_length": 128,
    "steps": 11,
    "lr": 1e-3,
    "batch_size": 16,
    "warmup_ratio": 0.2,
    "seed": 1,
}


def test_every_setting_that_shapes_the_weights_is_in_the_cache_key(corpus, tmp_path):
    assert set(KEY_CHANGES) | {"checkpoint_every"} == {f.name for f in dataclasses.fields(BaseSettings)}
    digests = {name: base_digest(dataclasses.replace(TINY, **{name: v}), corpus) for name, v in KEY_CHANGES.items()}
    assert len(set(digests.values()) | {base_digest(TINY, corpus)}) == len(KEY_CHANGES) + 1
    assert base_digest(dataclasses.replace(TINY, checkpoint_every=1), corpus) == base_digest(TINY, corpus)

    same_text = shutil.copytree(corpus, tmp_path / "same")
    fewer = prepare_corpus("news-articles", max_documents=199).directory
    assert base_digest(TINY, same_text) == base_digest(TINY, corpus)  # the content counts, not the path
    assert base_digest(TINY, fewer) != base_digest(TINY, corpus)
    assert base_entry(TINY, corpus, tmp_path) == tmp_path / "bases" / base_digest(TINY, corpus)


def test_a_batch_that_workers_cannot_share_equally_is_refused_before_anything_starts(corpus, tmp_path):
    with pytest.raises(ValueError, match="not a multiple of 2 workers"):
        ensure_base(dataclasses.replace(TINY, batch_size=7), corpus, "news-articles", workers=2, cache=tmp_path)
    assert not (tmp_path / "bases").exists() or not any((tmp_path / "bases").iterdir())


def test_packing_at_most_max_blocks_reads_only_what_fills_them_and_a_second_call_goes_on(minilm_dir):
    import re

    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(minilm_dir)
    texts = [f"document {i} says {'word ' * (i % 7)}." for i in range(1, 300)]
    stream = iter(texts)
    first = pack_blocks(tokenizer, stream, 32, chunk=4, max_blocks=5)
    second = pack_blocks(tokenizer, stream, 32, chunk=4, max_blocks=3)
    assert first.shape == (5, 32) and second.shape == (3, 32)
    assert (first == pack_blocks(tokenizer, iter(texts), 32)[:5]).all()  # the corpus's first blocks
    assert tokenizer.pad_token_id not in first  # every block full: no padding but at the corpus's end

    def documents(blocks) -> list[int]:
        return [int(n) for n in re.findall(r"document (\d+)", tokenizer.decode(blocks.flatten()))]

    read_first, read_second = documents(first), documents(second)
    assert read_first[0] == 1 and read_second[0] % 4 == 1  # the second starts at a chunk the first never read
    assert max(read_first) < read_second[0] <= max(read_first) + 4
    rest = int(next(stream).split()[1])  # the texts after the second call's last chunk stay unread
    assert rest % 4 == 1 and max(read_second) < rest <= max(read_second) + 4
