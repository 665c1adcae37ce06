"""A worker's batches, without Ray: its pairs from its stream of documents, built ahead on a thread."""

from __future__ import annotations

import threading

import pytest

from doctune_core.data import StreamPosition
from trainers.batches import PairStream, Prefetched
from trainers.pairs import build_pairs
from trainers.settings import TrialSettings


def _epochs(documents: list[list[str]], start: int = 0):
    """A document stream over ``documents`` repeated, with positions: ``DocumentStream.read``'s
    contract, as plain data."""
    read = start
    while True:
        yield documents[read % len(documents)], StreamPosition(0, read + 1)
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


def test_prefetched_batches_are_the_inline_ones_built_on_another_thread():
    builders: list[str] = []

    def build(step: int) -> int:
        builders.append(threading.current_thread().name)
        return step * step

    batches = Prefetched(build, stop=5)
    assert [batches(step) for step in range(2, 5)] == [4, 9, 16]  # a resumed loop starts mid-way
    batches.close()
    assert len(builders) == 3 and all(name.startswith("doctune-batches") for name in builders)
