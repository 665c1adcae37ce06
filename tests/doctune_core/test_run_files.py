"""A run's files through its file system (doctune_core/run_files.py): a directory, and a bucket on a real
S3-compatible server (moto)."""

from __future__ import annotations

import io
import os

import pytest

from doctune_core.run_files import RunFiles


def test_records_are_written_whole_read_back_and_listed(run_files):
    assert not run_files.is_file("trials/t1/diverged.json")
    assert run_files.children("trials/t1") == []  # absent: nothing, not an error
    run_files.write_json("trials/t1/diverged.json", {"step": 3})
    run_files.write("trials/t1/checkpoints/step_000002/model.safetensors", io.BytesIO(b"w" * 100))
    assert run_files.read_json("trials/t1/diverged.json") == {"step": 3}
    assert run_files.children("trials/t1") == ["checkpoints", "diverged.json"]  # no temporary names left
    run_files.write_json("trials/t1/diverged.json", {"step": 4})  # a rewrite replaces it
    assert run_files.read_json("trials/t1/diverged.json") == {"step": 4}
    run_files.delete_dir("trials/t1/checkpoints")
    run_files.delete_dir("trials/t1/checkpoints")  # gone already: nothing to do
    assert run_files.children("trials/t1") == ["diverged.json"]


def test_a_file_of_several_read_chunks_reads_back_whole(run_files):
    from doctune_core.run_files import _CHUNK

    weights = os.urandom(2 * _CHUNK + 12345)  # read a chunk at a time (bench/storage_reads.py: why)
    run_files.write("c/step_000002/model.safetensors", io.BytesIO(weights))
    assert run_files.read("c/step_000002/model.safetensors") == weights


def test_a_directory_is_read_in_place_or_fetched_for_the_block(run_files):
    run_files.write("c/step_000002/model.safetensors", io.BytesIO(b"weights"))
    run_files.write("c/step_000002/training_state/state.json", io.BytesIO(b"{}"))
    with run_files.as_local_dir("c/step_000002") as local:
        assert (local / "model.safetensors").read_bytes() == b"weights"
        assert (local / "training_state" / "state.json").read_bytes() == b"{}"
        assert (str(local) == run_files.path("c/step_000002")) == run_files.local
    assert local.exists() == run_files.local  # a fetched copy is removed after the block


def test_a_failed_write_leaves_the_old_file(run_files):
    run_files.write_json("search.json", {"spec": "smoke"})

    class Broken(io.BytesIO):
        def read(self, *args):
            raise OSError("the source broke")

    with pytest.raises(OSError, match="broke"):
        run_files.write("search.json", Broken())
    assert run_files.read_json("search.json") == {"spec": "smoke"}
    assert run_files.children("") == ["search.json"]


def test_a_plain_path_is_made_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    files = RunFiles.at("runs/one")
    assert files.local and files.uri == str(tmp_path / "runs" / "one")
    assert files.path("trials/t") == f"{tmp_path}/runs/one/trials/t"
