from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from doctune_core.data import (
    DataUnavailable,
    DocumentStream,
    PreparedCorpus,
    StreamPosition,
    check_source,
    prepare_corpus,
)

# every preparation is a Ray Data job, on a Ray of this module's own
pytestmark = [pytest.mark.ray, pytest.mark.own_ray]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DOCTUNE_CACHE", str(tmp_path / "cache"))


def _one_process_reference(texts: list[str]) -> list[list[str]]:
    """What preparation gives, written plainly: whitespace normalised, empty texts dropped,
    spaCy's sentencizer over the rest in one process."""
    import spacy

    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    kept = [" ".join(t.split()) for t in texts if t.split()]
    return [[s.text.strip() for s in doc.sents if s.text.strip()] for doc in nlp.pipe(kept)]


def test_the_packaged_corpus_prepares_to_the_one_process_result(local_ray):
    from doctune_core.data.news import pretraining_articles

    corpus = prepare_corpus("news-articles")
    expected = _one_process_reference([a.text for a in pretraining_articles()])
    assert list(corpus.documents()) == expected  # the same documents, in source order
    stats = corpus.stats
    assert stats.documents == len(expected) == len(pretraining_articles())
    assert stats.sentences == sum(map(len, expected))
    assert stats.single_sentence_documents == sum(len(d) == 1 for d in expected)
    assert len(corpus.row_groups) > 2  # several row groups, so workers' parts are pieces of them
    assert prepare_corpus("news-articles") == corpus  # the second time from the cache


def test_jsonl_corpus_is_sentence_split_and_odd_input_counted(tmp_path, local_ray):
    corpus = tmp_path / "c.jsonl"
    lines = [
        json.dumps({"text": "The first sentence. The second one! A third?"}),
        json.dumps({"text": "   "}),
        json.dumps({"text": "Only one sentence here"}),
    ]
    corpus.write_bytes(("\n".join(lines) + "\n").encode() + b'{"text": "bad \xff byte. Then more."}\n')
    prepared = prepare_corpus(str(corpus))
    documents = list(prepared.documents())
    assert documents[0] == ["The first sentence.", "The second one!", "A third?"]
    stats = prepared.stats
    assert (stats.documents, stats.dropped_empty, stats.single_sentence_documents) == (3, 1, 1)
    assert stats.replaced_invalid_utf8 == 1 and "\ufffd" in documents[2][0]
    assert prepare_corpus(str(corpus)) == prepared  # cached


def test_directories_parquet_and_local_hf_datasets_are_read(tmp_path, local_ray):
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "a.txt").write_text("One document. Over two lines\nstill the same.")
    (folder / "b.txt").write_text("Another one.")
    pq.write_table(pa.table({"text": ["From Parquet. Two.", None]}), folder / "c.parquet")
    assert list(prepare_corpus(str(folder)).documents()) == [
        ["One document.", "Over two lines still the same."],
        ["Another one."],
        ["From Parquet.", "Two."],
    ]
    hub_like = tmp_path / "hub_like"
    hub_like.mkdir()
    (hub_like / "train.jsonl").write_text("".join(json.dumps({"text": f"Row {i}. Done."}) + "\n" for i in range(5)))
    prepared = prepare_corpus(f"hf:{hub_like}:train")  # a local dataset directory, streamed as from the hub
    assert [d[0] for d in prepared.documents()] == [f"Row {i}." for i in range(5)]


def test_oversized_documents_are_truncated_and_counted(tmp_path, local_ray):
    corpus = tmp_path / "big.txt"
    corpus.write_text("Word and word again. " * 60_000)  # 1.2 MB on one line
    stats = prepare_corpus(str(corpus)).stats
    assert stats.truncated == 1 and stats.documents == 1


def test_max_documents_keeps_the_first_documents(tmp_path, local_ray):
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(f"Document {i}. Two sentences." for i in range(50)))
    prepared = prepare_corpus(str(corpus), max_documents=7)
    assert [d[0] for d in prepared.documents()] == [f"Document {i}." for i in range(7)]


@pytest.mark.parametrize(
    ("content", "suffix", "message"),
    [
        ("", ".jsonl", "holds no non-empty document"),
        ("{not json\n", ".jsonl", "line 1 is not JSON"),
        ('{"text": "fine"}\n{"body": "x"}\n', ".jsonl", 'line 2 has no string "text" field'),
        ("not parquet", ".parquet", "not a readable Parquet file"),
        ("x", ".csv", "use .jsonl, .txt or .parquet"),
    ],
)
def test_unusable_corpora_are_refused_with_the_reason_and_nothing_left(tmp_path, content, suffix, message, local_ray):
    corpus = tmp_path / f"c{suffix}"
    corpus.write_text(content)
    with pytest.raises(DataUnavailable, match=message):
        prepare_corpus(str(corpus))
    corpora = tmp_path / "cache" / "corpora"
    assert not corpora.exists() or not [p for p in corpora.iterdir() if not p.name.endswith(".lock")]


def _many_documents(path, count: int) -> None:
    path.write_text("\n".join(f"Document {i} begins. It has a second sentence." for i in range(count)))


STREAMED = 3001  # documents of the corpus the stream tests share: split 1000/1000/1001 over three workers


@pytest.fixture(scope="module")
def streamed(tmp_path_factory, local_ray) -> PreparedCorpus:
    """One corpus of ``STREAMED`` numbered documents, prepared once, for the tests of how workers read it."""
    directory = tmp_path_factory.mktemp("streamed")
    source = directory / "c.txt"
    _many_documents(source, STREAMED)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DOCTUNE_CACHE", str(directory / "cache"))
        return prepare_corpus(str(source))


def test_workers_parts_are_disjoint_and_cover_the_corpus(streamed):
    parts = [DocumentStream(streamed, rank, 3, seed=0, window_rows=100) for rank in range(3)]
    read = [_take(part.read(), part.rows) for part in parts]
    seen = [{d[0] for d, _, _ in part} for part in read]
    assert sorted(len(s) for s in seen) == [1000, 1000, 1001]
    assert set.union(*seen) == {f"Document {i} begins." for i in range(STREAMED)}
    # each document comes with its corpus row, by which its mined neighbours are found
    assert all(d[0] == f"Document {row} begins." for part in read for d, _, row in part)
    assert not (seen[0] & seen[1]) and not (seen[1] & seen[2])


def _take(iterator, count: int) -> list:
    return [next(iterator) for _ in range(count)]


def test_the_order_is_seeded_per_epoch_and_a_stream_resumes_where_it_stood(streamed):
    stream = DocumentStream(streamed, 0, 2, seed=3, window_rows=64)
    rows = stream.rows  # one epoch of this worker's half
    first = _take(stream.read(), 2 * rows + 100)  # all of epoch 0, then on into epochs 1 and 2
    assert first == _take(DocumentStream(streamed, 0, 2, seed=3, window_rows=64).read(), 2 * rows + 100)
    epoch0 = [d[0] for d, _, _ in first[:rows]]
    assert len(set(epoch0)) == rows  # every document of the half once
    assert epoch0 != [d[0] for d, _, _ in first[rows : 2 * rows]]  # a new order each epoch
    assert epoch0 != [d[0] for d, _, _ in _take(DocumentStream(streamed, 0, 2, seed=4, window_rows=64).read(), rows)]
    for cut in (1, rows // 2, rows - 1, rows, rows + rows // 2):
        position = first[cut - 1].position
        resumed = _take(stream.read(position), len(first) - cut)
        assert resumed == first[cut:], cut
    assert first[rows - 1].position == StreamPosition(0, rows) and first[rows].position == StreamPosition(1, 1)


def test_a_worker_holds_one_window_of_documents(streamed):
    corpus = dataclasses.replace(streamed)  # its own, to count the row groups it reads
    reads = []
    stream = DocumentStream(corpus, 0, 1, seed=0, window_rows=512)
    original = corpus.read_group
    object.__setattr__(corpus, "read_group", lambda group: reads.append(group) or original(group))
    iterator = stream.read()
    _take(iterator, 10)
    assert 2 <= len(reads) <= 3  # the first window only: at least 512 rows of 256-row groups
    assert stream.head(5) == [[f"Document {i} begins.", "It has a second sentence."] for i in range(5)]


def test_a_killed_preparation_is_never_taken_for_a_complete_one(tmp_path):
    source = tmp_path / "c.txt"
    _many_documents(source, 20_000)
    env = {**os.environ, "PYTHONPATH": ROOT, "RAY_ADDRESS": "local"}
    code = f"from doctune_core.data import prepare_corpus; prepare_corpus({str(source)!r})"
    child = subprocess.Popen([sys.executable, "-c", code], env=env, start_new_session=True)
    corpora = tmp_path / "cache" / "corpora"
    deadline = time.monotonic() + 300  # a bound on a failure: the suite runs this at a low priority
    while not list(corpora.glob("*.partial-*/part-*")) and time.monotonic() < deadline:  # shards being written
        time.sleep(0.2)
    # the preparation's whole process tree (its Ray too) dies at once, as on a lost machine
    tree = [psutil.Process(child.pid), *psutil.Process(child.pid).children(recursive=True)]
    os.killpg(child.pid, signal.SIGKILL)
    for process in tree:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()
    psutil.wait_procs(tree, timeout=60)
    child.wait()
    assert list(corpora.glob("*.partial-*")), "the preparation was killed before it wrote a shard"
    # the kill may come after the manifest was written: only the renamed directory is a corpus
    assert [p.name for p in corpora.iterdir() if p.is_dir() and ".partial-" not in p.name] == []
    prepared = prepare_corpus(str(source))  # starts over, and cleans the killed one's directory
    assert prepared.stats.documents == 20_000 and not list(corpora.glob("*.partial-*"))


def test_the_packaged_news_corpus_excludes_the_held_out_articles():
    from doctune_core.data.news import held_out_articles, news_articles, pretraining_articles

    held, trained = held_out_articles(), pretraining_articles()
    locked_duplicates = 2  # the locked tenth's articles near-duplicating another's: in no part, never trained on
    assert len(held) + len(trained) + locked_duplicates == len(news_articles()) > 3500
    assert 0.26 < len(held) / len(news_articles()) < 0.34  # three tenths: validation and retired, dev, locked test
    assert not {a.article_id for a in held} & {a.article_id for a in trained}


@pytest.mark.parametrize(
    ("content", "suffix", "message"),
    [
        (b"", ".jsonl", "holds no non-empty document"),
        (b"\n  \n", ".txt", "holds no non-empty document"),
        (bytes(range(256)) * 64, ".jsonl", "is binary, not text"),
        (b"{not json\n", ".jsonl", "line 1 is not JSON"),
        (b'{"text": "fine"}\n{"body": "x"}\n', ".jsonl", 'line 2 has no string "text" field'),
        (b"not parquet", ".parquet", "not a readable Parquet file"),
    ],
)
def test_a_corpus_whose_beginning_is_unusable_is_refused_before_ray(tmp_path, content, suffix, message):
    """``check_source`` runs before Ray starts: no Ray here, and it answers in milliseconds."""
    corpus = tmp_path / f"c{suffix}"
    corpus.write_bytes(content)
    with pytest.raises(DataUnavailable, match=message):
        check_source(str(corpus))


def test_a_large_corpus_is_checked_by_its_beginning_only(tmp_path):
    corpus = tmp_path / "c.jsonl"
    with corpus.open("w") as handle:  # a bad record far past what the check reads: found later, by Ray Data
        handle.writelines('{"text": "A document."}\n' for _ in range(20_000))
        handle.write("{not json\n")
    check_source(str(corpus))
