from __future__ import annotations

import json

import pytest

from core.data import DataUnavailable, prepare_corpus, read_prepared


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DOCTUNE_CACHE", str(tmp_path / "cache"))


def test_jsonl_corpus_is_sentence_split_and_odd_input_counted(tmp_path):
    corpus = tmp_path / "c.jsonl"
    lines = [
        json.dumps({"text": "The first sentence. The second one! A third?"}),
        json.dumps({"text": "   "}),
        json.dumps({"text": "Only one sentence here"}),
    ]
    corpus.write_bytes(("\n".join(lines) + "\n").encode() + b'{"text": "bad \xff byte. Then more."}\n')
    path, stats = prepare_corpus(str(corpus))
    documents = read_prepared(path)
    assert documents[0] == ["The first sentence.", "The second one!", "A third?"]
    assert (stats.documents, stats.dropped_empty, stats.single_sentence_documents) == (3, 1, 1)
    assert stats.replaced_invalid_utf8 == 1 and "\ufffd" in documents[2][0]
    assert prepare_corpus(str(corpus)) == (path, stats)  # cached


def test_shards_partition_the_corpus(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(f"Document {i}. It has two sentences." for i in range(7)))
    path, _ = prepare_corpus(str(corpus))
    shards = [read_prepared(path, rank, 3) for rank in range(3)]
    assert sum(len(s) for s in shards) == 7
    assert sorted(d[0] for s in shards for d in s) == sorted(f"Document {i}." for i in range(7))


def test_oversized_documents_are_truncated_and_counted(tmp_path):
    corpus = tmp_path / "big.txt"
    corpus.write_text("Word and word again. " * 60_000)  # 1.2 MB on one line
    _, stats = prepare_corpus(str(corpus))
    assert stats.truncated == 1 and stats.documents == 1


@pytest.mark.parametrize(
    ("content", "suffix", "message"),
    [
        ("", ".jsonl", "holds no non-empty document"),
        ("{not json\n", ".jsonl", "line 1 is not JSON"),
        ('{"body": "x"}\n', ".jsonl", 'no string "text" field'),
        ("x", ".csv", "use .jsonl, .txt or .parquet"),
    ],
)
def test_unusable_corpora_are_refused_with_the_reason(tmp_path, content, suffix, message):
    corpus = tmp_path / f"c{suffix}"
    corpus.write_text(content)
    with pytest.raises(DataUnavailable, match=message):
        prepare_corpus(str(corpus))


def test_packaged_news_corpus_excludes_the_held_out_articles():
    from core.data.news import held_out_articles, news_articles, pretraining_articles

    held, trained = held_out_articles(), pretraining_articles()
    assert len(held) + len(trained) == len(news_articles()) > 3500
    assert 0.07 < len(held) / len(news_articles()) < 0.13
    assert not {a.article_id for a in held} & {a.article_id for a in trained}
