"""A worker's batches: its positive pairs (and their hard negatives) built from its stream of
documents (``PairStream``), each step's batch built on a background thread while the step before
trains (``Prefetched``)."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

from doctune_core.data import StreamPosition
from doctune_core.data.stream import StreamedDocument
from trainers.hard_negatives import HardNegatives
from trainers.pairs import PairBuilder

T = TypeVar("T")


class Prefetched:
    """``build(step)`` for the next step computed on a background thread while this step trains.

    One thread builds the steps in order (``PairStream`` reads its documents as a stream), so the
    batches are the ones building them inline gives. Building one (its pairs, then tokenising 32 views of 256
    tokens) takes about 20 ms on one core: noise next to a CPU step, a sizeable share of a GPU one.
    """

    def __init__(self, build: Callable[[int], T], stop: int) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="doctune-batches")
        self._build, self._stop = build, stop
        self._ahead: dict[int, Future] = {}

    def __call__(self, step: int) -> T:
        future = self._ahead.pop(step, None) or self._pool.submit(self._build, step)
        if step + 1 < self._stop:
            self._ahead[step + 1] = self._pool.submit(self._build, step + 1)
        return future.result()

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


@dataclass(frozen=True)
class PairBatch:
    """One step's pairs on one rank: ``views_a[i]`` and ``views_b[i]`` a positive pair, then
    ``negatives``: each pair's hard negatives in turn (``trainers.hard_negatives``; none when off)."""

    views_a: list[str]
    views_b: list[str]
    negatives: list[str]

    @property
    def texts(self) -> list[str]:
        """Every text the step embeds, in the order ``trainers.training_loss`` reads its rows."""
        return self.views_a + self.views_b + self.negatives


class PairStream:
    """This rank's positive pairs, built from its stream of documents (``DocumentStream.read``:
    each document with the stream's position after it and its corpus row): the batch of step ``s``
    draws its randomness from ``(seed, rank, s)``, and documents that cannot give a pair for this
    recipe (or, with ``negatives``, too few hard negatives) are skipped and counted. Batches are
    built in step order; ``position(step)`` is where the stream stood after step ``step``'s batch,
    which a checkpoint records so that a resumed trial continues the stream. ``give_up_after``: the
    documents skipped in a row that prove no document can give a pair (the rows of the worker's
    part)."""

    def __init__(
        self,
        documents: Iterator[StreamedDocument],
        builder: PairBuilder,
        batch_size: int,
        seed: int,
        rank: int,
        give_up_after: int,
        negatives: HardNegatives | None = None,
    ) -> None:
        self.builder, self.batch_size, self.seed, self.rank = builder, batch_size, seed, rank
        self._documents, self._give_up_after, self._negatives = documents, give_up_after, negatives
        self._positions: dict[int, StreamPosition] = {}
        self.skipped = 0

    def batch(self, step: int) -> PairBatch:
        rng = random.Random(f"{self.seed}/{self.rank}/step{step}")
        batch, skipped_in_a_row = PairBatch([], [], []), 0
        while len(batch.views_a) < self.batch_size:
            document = next(self._documents)
            pair = self.builder(document.sentences, rng)
            negatives = None if pair is None or self._negatives is None else self._negatives.views(document.row, rng)
            if pair is None or (self._negatives is not None and negatives is None):
                self.skipped += 1
                skipped_in_a_row += 1
                if skipped_in_a_row > self._give_up_after:
                    raise ValueError(
                        "no document in this shard can give a positive pair for this recipe"
                        + (" with its hard negatives" if self._negatives is not None else "")
                    )
                continue
            skipped_in_a_row = 0
            batch.views_a.append(pair[0])
            batch.views_b.append(pair[1])
            batch.negatives.extend(negatives or ())
        self._positions = {s: p for s, p in self._positions.items() if s >= step - 2} | {step: document.position}
        return batch

    def position(self, step: int) -> StreamPosition:
        return self._positions[step]
