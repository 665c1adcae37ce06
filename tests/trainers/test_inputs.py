"""The search's inputs on a node that does not see the driver's cache (trainers/inputs.py), through a
bucket of a real S3-compatible server."""

from __future__ import annotations

import shutil

from doctune_core.run_files import RunFiles
from trainers.inputs import on_this_node, share_inputs


def _corpus(cache):
    """An input in the driver's cache, as a prepared corpus lies there."""
    corpus = cache / "corpora" / "news-abc123"
    (corpus / "shards").mkdir(parents=True)
    (corpus / "manifest.json").write_text('{"digest": "abc123"}')
    (corpus / "shards" / "part-0.parquet").write_bytes(b"p" * 100)
    return corpus


def test_an_input_goes_through_the_bucket_once_and_reaches_a_node_without_the_drivers_cache(s3, tmp_path, monkeypatch):
    driver_cache = tmp_path / "driver-cache"
    corpus, installed = _corpus(driver_cache), tmp_path / "site-packages" / "model"
    installed.mkdir(parents=True)
    files = RunFiles.at(s3.uri("runs", "inputs-1"))
    shared = share_inputs(files, [str(corpus), str(installed)], driver_cache)
    assert shared == {str(corpus): "inputs/corpora-news-abc123"}  # a package's files are on every node
    assert set(files.listing("inputs")) == {
        "corpora-news-abc123/manifest.json",
        "corpora-news-abc123/shards/part-0.parquet",
        "corpora-news-abc123/.whole",
    }
    assert share_inputs(files, [str(corpus)], driver_cache) == shared  # whole there: not sent again
    # a node that sees the driver's cache reads it in place
    assert on_this_node(files, shared, str(corpus)) == str(corpus)
    # a node that does not: its own cache, fetched once
    node_cache = tmp_path / "node-cache"
    monkeypatch.setenv("DOCTUNE_CACHE", str(node_cache))
    shutil.rmtree(driver_cache)
    local = on_this_node(files, shared, str(corpus))
    assert local == str(node_cache / "inputs" / "corpora-news-abc123")
    assert (node_cache / "inputs" / "corpora-news-abc123" / "shards" / "part-0.parquet").read_bytes() == b"p" * 100
    files.delete_dir("inputs")
    assert on_this_node(files, shared, str(corpus)) == local  # fetched once: the bucket is not asked again
    assert [p.name for p in (node_cache / "inputs").iterdir()] == ["corpora-news-abc123"]  # nothing half-written
    assert on_this_node(files, shared, str(installed)) == str(installed)


def test_a_run_in_a_directory_shares_nothing(tmp_path):
    cache = tmp_path / "cache"
    assert share_inputs(RunFiles.at(tmp_path / "run"), [str(_corpus(cache))], cache) == {}
