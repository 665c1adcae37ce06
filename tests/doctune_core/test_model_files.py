from __future__ import annotations

import shutil
from concurrent.futures import ThreadPoolExecutor

import pytest

from doctune_core.model_files import ModelFiles
from evaluators.cache import embedding_digest


def _checkpoint(minilm_dir, directory):
    """A trial checkpoint's layout: the encoder, its record, training state and reporting files."""
    checkpoint = shutil.copytree(minilm_dir, directory)
    (checkpoint / "training_state").mkdir()
    (checkpoint / "training_state" / "optimizer.safetensors").write_bytes(b"moments")
    (checkpoint / "scores.json").write_text("{}")
    (checkpoint / "report.json").write_text("{}")
    (checkpoint / "doctune.json").write_text('{"step": 2}')
    return checkpoint


def test_the_encoder_travels_without_its_training_state_and_lands_whole_with_the_same_embedding_key(
    minilm_dir, tmp_path
):
    checkpoint = _checkpoint(minilm_dir, tmp_path / "node-a" / "step_000002")
    files = ModelFiles.read(checkpoint)
    assert files.name == str(checkpoint)
    assert "training_state" not in files.files and not {"scores.json", "report.json"} & set(files.files)
    assert {"config.json", "model.safetensors", "tokenizer.json", "doctune.json"} <= set(files.files)
    landed = files.materialize(tmp_path / "node-b")
    assert landed.parent == tmp_path / "node-b" and landed.name == files.digest
    assert embedding_digest(str(landed)) == embedding_digest(str(checkpoint))  # the cache entry is shared
    assert sorted(p.name for p in landed.iterdir()) == sorted(files.files)
    assert files.materialize(tmp_path / "node-b") == landed  # found, not written again
    (checkpoint / "model.safetensors").write_bytes(b"other weights")
    assert ModelFiles.read(checkpoint).digest != files.digest


def test_processes_landing_the_same_model_at_once_leave_one_whole_directory(minilm_dir, tmp_path):
    files = ModelFiles.read(minilm_dir)
    with ThreadPoolExecutor(8) as pool:
        landed = set(pool.map(lambda _: files.materialize(tmp_path), range(16)))
    assert landed == {tmp_path / files.digest}
    assert [p.name for p in tmp_path.iterdir()] == [files.digest]  # no partial copy left
    assert embedding_digest(str(tmp_path / files.digest)) == embedding_digest(minilm_dir)


def test_a_directory_that_is_gone_cannot_be_read(tmp_path):
    with pytest.raises(FileNotFoundError, match="no longer exists"):
        ModelFiles.read(tmp_path / "step_000002")
