"""A worker's batches, without Ray: its pairs from its stream of documents, built ahead on a thread."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from doctune_core.data import StreamPosition
from doctune_core.data.neighbours import MINED, Neighbours
from doctune_core.data.stream import StreamedDocument
from tests.conftest import written_corpus
from trainers.batches import PairStream, Prefetched
from trainers.hard_negatives import HardNegatives
from trainers.pairs import build_pairs
from trainers.settings import TrialSettings


def _epochs(documents: list[list[str]], start: int = 0):
    """A document stream over ``documents`` repeated, with positions and rows: ``DocumentStream.read``'s
    contract, as plain data."""
    read = start
    while True:
        yield StreamedDocument(documents[read % len(documents)], StreamPosition(0, read + 1), read % len(documents))
        read += 1


def test_pair_stream_is_deterministic_per_step_skips_unusable_documents_and_resumes():
    documents = [["one two three.", "four five."], ["x"], ["alpha beta.", "gamma delta.", "epsilon."]]
    context = (TrialSettings(), 64, lambda t: len(t.split()), documents)

    def stream(start: int = 0, rank: int = 0) -> PairStream:
        return PairStream(_epochs(documents, start), build_pairs(*context), 3, seed=7, rank=rank, give_up_after=3)

    uninterrupted = stream()
    batches = [uninterrupted.batch(step) for step in range(4)]
    assert uninterrupted.skipped == 6  # ["x"] (one word: no pair), every third of 18 documents
    again = stream()
    assert [again.batch(step) for step in range(4)] == batches
    position = uninterrupted.position(1)
    assert position.offset == 9  # 6 pairs and 3 skipped documents read
    resumed = stream(start=position.offset)
    assert [resumed.batch(step) for step in (2, 3)] == batches[2:]  # what a resumed worker sees
    assert any(stream(rank=1).batch(s) != batches[s] for s in range(4))
    with pytest.raises(ValueError, match="no document in this shard can give a positive pair"):
        PairStream(_epochs([["x"]]), build_pairs(*context), 3, seed=7, rank=0, give_up_after=1).batch(0)


def test_each_pair_takes_views_of_its_document_s_neighbours_as_hard_negatives(tmp_path):
    documents = [[f"Document {i} says {word}.", f"It ends with {word}."] for i, word in enumerate("abcdef")]
    corpus = written_corpus(tmp_path / "corpus", documents)
    rows = np.full((len(documents), MINED), -1)
    for row in range(len(documents)):
        rows[row, :2] = [(row + 1) % 6, (row + 2) % 6]
    rows[3] = [4, -1, -1, -1]  # one neighbour: too few for two negatives
    settings = TrialSettings(views="dropout")  # view B is the whole document: each negative is exact
    builder = build_pairs(settings, 64, lambda t: len(t.split()), documents)
    whole = [" ".join(d) for d in documents]

    def stream(count: int) -> PairStream:
        negatives = HardNegatives(corpus, Neighbours(rows), count, builder)
        return PairStream(_epochs(documents), builder, 4, seed=7, rank=0, give_up_after=6, negatives=negatives)

    one = stream(1).batch(0)
    assert one.negatives == [whole[(i + 1) % 6] for i in range(4)]
    assert one.texts == one.views_a + one.views_b + one.negatives
    two = stream(2)
    batch = two.batch(0)
    assert two.skipped == 1  # document 3
    assert batch.views_b == [whole[i] for i in (0, 1, 2, 4)]
    assert batch.negatives == [whole[n] for i in (0, 1, 2, 4) for n in ((i + 1) % 6, (i + 2) % 6)]
    rows[:] = -1
    with pytest.raises(ValueError, match="with its hard negatives"):
        stream(1).batch(0)


def test_prefetched_batches_are_the_inline_ones_built_on_another_thread():
    builders: list[str] = []

    def build(step: int) -> int:
        builders.append(threading.current_thread().name)
        return step * step

    batches = Prefetched(build, stop=5)
    assert [batches(step) for step in range(2, 5)] == [4, 9, 16]  # a resumed loop starts mid-way
    batches.close()
    assert len(builders) == 3 and all(name.startswith("doctune-batches") for name in builders)
