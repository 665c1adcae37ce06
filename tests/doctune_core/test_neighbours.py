"""Hard negatives mined from a pretraining corpus: each document's BM25 neighbours, never itself or a
near copy of it, mined once per corpus content."""

from __future__ import annotations

import random

import numpy as np
import pytest

from doctune_core.data import PreparedCorpus
from doctune_core.data.duplicates import NEAR, shingles, similarity
from doctune_core.data.neighbours import MANIFEST, MINED, Neighbours, ensure_neighbours, mine, neighbours_dir
from tests.conftest import written_corpus

RAIL = "The railway strike halted trains across the region as union leaders met rail operators over pay."
RAIL_AGAIN = "Union leaders called off the rail strike, and trains ran again once operators raised pay."
OTHER = [
    "Farmers brought in a record wheat harvest after a mild spring and late summer rains in the valley.",
    "The health ministry approved a new vaccine after trials showed strong protection against the virus.",
]


def _documents() -> list[list[str]]:
    """A rail story, a near copy of it, another rail story in other words, two other matters, filler
    words, and an empty row."""
    rng = random.Random(0)
    filler = "city council museum library theatre orchestra painting sculpture poetry novel garden bridge".split()
    documents = [[RAIL, "Commuters waited for hours."], [RAIL, "Commuters waited for hours!"], [RAIL_AGAIN]]
    documents += [[text, "Officials said more details would follow."] for text in OTHER]
    documents += [[" ".join(rng.choices(filler, k=40)) + "."] for _ in range(8)]
    return [*documents, []]


def test_a_document_s_neighbours_share_its_topic_and_are_never_itself_or_a_near_copy(tmp_path):
    corpus = written_corpus(tmp_path / "corpus", _documents())
    rows, counts = mine(corpus)
    texts = [" ".join(d) for d in _documents()]
    assert rows.shape == (corpus.rows, MINED)
    assert similarity(shingles(texts[0]), shingles(texts[1])) >= NEAR  # the near copy the rule must catch
    assert counts["near_duplicates"] >= 2  # rows 0 and 1, each the other's
    for row, text in enumerate(texts):
        found = Neighbours(rows).of(row)
        assert row not in found
        assert all(similarity(shingles(text), shingles(texts[n])) < NEAR for n in found)
        assert bool(found) == bool(text)  # the empty row has none
    assert Neighbours(rows).of(0)[0] == 2 and Neighbours(rows).of(2)[0] in (0, 1)  # the other rail story first


def test_the_neighbours_are_mined_once_per_corpus_content(tmp_path, monkeypatch):
    monkeypatch.setenv("DOCTUNE_CACHE", str(tmp_path / "cache"))
    corpus = written_corpus(tmp_path / "corpus", _documents())
    directory = ensure_neighbours(corpus)
    assert directory == neighbours_dir(corpus) and (directory / MANIFEST).is_file()
    stamp = (directory / MANIFEST).stat().st_mtime_ns
    assert ensure_neighbours(written_corpus(tmp_path / "same", _documents())) == directory
    assert (directory / MANIFEST).stat().st_mtime_ns == stamp  # the same content: not mined again
    other = written_corpus(tmp_path / "other", [*_documents(), ["One more document on rail and trains."]])
    assert neighbours_dir(other) != directory
    assert np.array_equal(Neighbours.load(directory).rows, mine(corpus)[0])
    assert not list(directory.parent.glob("*.partial-*"))


@pytest.mark.ray
@pytest.mark.own_ray  # the default corpus, prepared by a Ray of its own where the cache lacks it
def test_on_the_news_corpus_a_document_s_first_neighbour_shares_more_of_its_words_than_another_does(default_corpus):
    corpus = PreparedCorpus.load(default_corpus)
    neighbours = Neighbours(mine(corpus)[0])
    texts = [" ".join(d) for group in corpus.row_groups for d in corpus.read_group(group)]
    rng = random.Random(0)

    def overlap(a: str, b: str) -> float:
        words_a, words_b = set(a.lower().split()), set(b.lower().split())
        return len(words_a & words_b) / len(words_a | words_b)

    sampled = rng.sample([row for row, text in enumerate(texts) if text], 200)
    first = [overlap(texts[row], texts[neighbours.of(row)[0]]) for row in sampled]
    drawn = [overlap(texts[row], texts[rng.choice(sampled)]) for row in sampled]
    assert all(len(neighbours.of(row)) == MINED for row in sampled)
    assert np.median(first) > 1.5 * np.median(drawn)
