"""A corpus kept in a bucket (``corpus: {source: s3://...}``), against the suite's S3 server."""

from __future__ import annotations

import json

import pytest

from doctune_core.data import DataUnavailable, check_source, prepare_corpus

# the preparation is a Ray Data job, on a Ray of this module's own
pytestmark = [pytest.mark.ray, pytest.mark.own_ray]


@pytest.fixture(scope="module")
def bucket_ray(s3, local_ray):
    """The module's local Ray, started once the S3 server's credentials are in the environment: its
    workers read the bucket as a cluster's nodes do, with the credentials of their own environment."""
    yield


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DOCTUNE_CACHE", str(tmp_path / "cache"))


def test_a_corpus_in_a_bucket_prepares_as_the_same_files_do_on_disk(tmp_path, bucket_ray, s3):
    """``corpus: {source: s3://...}``: a prefix of files, or one file, read by the Ray tasks straight
    from the bucket, gives the documents the same files give on disk; it is prepared once, and again
    when a file changes; a prefix with nothing doctune reads, or none at all, is refused before Ray."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    from doctune_core.run_files import RunFiles

    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "a.txt").write_text("One document. Over two lines\nstill the same.")
    (folder / "b.jsonl").write_text(json.dumps({"text": "From JSON lines. Two."}) + "\n")
    pq.write_table(pa.table({"text": ["From Parquet. Two.", None]}), folder / "c.parquet")
    uri = s3.uri("runs", "corpora/news")
    bucket = RunFiles.at(uri)
    for path in sorted(folder.iterdir()):
        bucket.write(path.name, io.BytesIO(path.read_bytes()))
    on_disk = list(prepare_corpus(str(folder)).documents())
    prepared = prepare_corpus(uri)
    assert list(prepared.documents()) == on_disk  # a prefix's .txt files hold one document each, as a folder's
    assert prepare_corpus(uri) == prepared  # prepared once
    one_file = s3.uri("runs", "corpora/news/b.jsonl")
    assert list(prepare_corpus(one_file).documents()) == [["From JSON lines.", "Two."]]
    bucket.write("b.jsonl", io.BytesIO((json.dumps({"text": "Changed. Now."}) + "\n").encode()))
    assert prepare_corpus(uri) != prepared  # a changed file: prepared again
    with pytest.raises(DataUnavailable, match="does not exist; check"):
        check_source(s3.uri("runs", "corpora/nothing-here"))
    bucket.write("notes/readme.md", io.BytesIO(b"not a corpus"))
    with pytest.raises(DataUnavailable, match=r"holds no \.jsonl, \.txt or \.parquet files"):
        check_source(s3.uri("runs", "corpora/news/notes"))
    with pytest.raises(DataUnavailable, match="is binary, not text"):
        bucket.write("bad/c.txt", io.BytesIO(bytes(range(256)) * 8))
        check_source(s3.uri("runs", "corpora/news/bad"))
