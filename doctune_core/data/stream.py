"""A Train worker's part of a prepared corpus, streamed in a seeded order.

Rank ``r`` of ``w`` workers owns the corpus rows ``[r*N//w, (r+1)*N//w)``: the parts are disjoint
and differ in size by at most one row, and each is a run of (pieces of) Parquet row groups. An
epoch reads the part's pieces in an order shuffled by ``(seed, rank, epoch)``, a window of at
least ``window_rows`` rows at a time, and shuffles each window's rows by ``(seed, rank, epoch,
window)``: a worker holds one window of documents, whatever the corpus's size. A
``StreamPosition`` (epoch, rows read in it) says where a stream is; reading from one skips whole
windows by their row counts and reads only the window it falls in, so a resumed trial continues
its stream without reading what came before.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from doctune_core.data.corpus import PreparedCorpus, RowGroup

WINDOW_ROWS = 4096  # documents a worker holds at once (about 12 MB of news articles)


@dataclass(frozen=True)
class StreamPosition:
    epoch: int = 0
    offset: int = 0  # rows of this epoch's order already read, empty documents included


class StreamedDocument(NamedTuple):
    sentences: list[str]
    position: StreamPosition  # the stream's position after it
    row: int  # its row in the corpus (``doctune_core.data.neighbours`` keys its neighbours by it)


@dataclass(frozen=True)
class _Piece:
    group: RowGroup
    start: int  # this part's rows of the group: [start, stop)
    stop: int
    first_row: int  # the corpus row of the group's row ``start``

    @property
    def rows(self) -> int:
        return self.stop - self.start


class DocumentStream:
    def __init__(
        self, corpus: PreparedCorpus, rank: int, world_size: int, seed: int, window_rows: int = WINDOW_ROWS
    ) -> None:
        self.corpus, self.rank, self.seed, self.window_rows = corpus, rank, seed, window_rows
        total = corpus.rows
        self.pieces = _pieces(corpus.row_groups, rank * total // world_size, (rank + 1) * total // world_size)
        if not self.pieces:
            raise ValueError(f"worker {rank} of {world_size} has no document: the corpus has {total} rows")

    @property
    def rows(self) -> int:
        return sum(piece.rows for piece in self.pieces)

    def head(self, limit: int) -> list[list[str]]:
        """The part's first ``limit`` non-empty documents, in corpus order."""
        documents: list[list[str]] = []
        for piece in self.pieces:
            documents += [d for d in self._read(piece) if d][: limit - len(documents)]
            if len(documents) >= limit:
                break
        return documents

    def first(self, limit: int) -> Sequence[list[str]]:
        """``head(limit)``, read when first used: a recipe that keeps no corpus statistics never
        reads it."""
        return _Deferred(lambda: self.head(limit))

    def read(self, start: StreamPosition = StreamPosition()) -> Iterator[StreamedDocument]:
        """Non-empty documents from ``start`` on, each with the position after it and its corpus
        row, epoch after epoch without end."""
        epoch, offset = start.epoch, start.offset
        while True:
            found = False
            window_start = 0
            for number, window in enumerate(self._windows(epoch)):
                window_rows = sum(piece.rows for piece in window)
                if window_start + window_rows <= offset:  # read before the position: skipped unread
                    window_start += window_rows
                    continue
                rows = [(piece.first_row + i, d) for piece in window for i, d in enumerate(self._read(piece))]
                random.Random(f"{self.seed}/{self.rank}/epoch{epoch}/window{number}").shuffle(rows)
                for index in range(max(0, offset - window_start), len(rows)):
                    row, document = rows[index]
                    if document:
                        found = True
                        yield StreamedDocument(document, StreamPosition(epoch, window_start + index + 1), row)
                window_start += window_rows
            if not found and offset == 0:
                raise ValueError(f"worker {self.rank}'s part of the corpus holds no non-empty document")
            epoch, offset = epoch + 1, 0

    def _windows(self, epoch: int) -> list[list[_Piece]]:
        order = list(self.pieces)
        random.Random(f"{self.seed}/{self.rank}/epoch{epoch}").shuffle(order)
        windows: list[list[_Piece]] = [[]]
        for piece in order:
            if sum(p.rows for p in windows[-1]) >= self.window_rows:
                windows.append([])
            windows[-1].append(piece)
        return windows

    def _read(self, piece: _Piece) -> list[list[str]]:
        return self.corpus.read_group(piece.group)[piece.start : piece.stop]


def _pieces(groups: tuple[RowGroup, ...], first: int, stop: int) -> list[_Piece]:
    """The row groups' pieces that hold corpus rows ``[first, stop)``."""
    pieces, group_start = [], 0
    for group in groups:
        lo, hi = max(first, group_start), min(stop, group_start + group.rows)
        if lo < hi:
            pieces.append(_Piece(group, lo - group_start, hi - group_start, lo))
        group_start += group.rows
    return pieces


class _Deferred(Sequence):
    """A list made by ``make`` when first read."""

    def __init__(self, make) -> None:
        self._make, self._items = make, None

    def _list(self) -> list:
        if self._items is None:
            self._items = self._make()
        return self._items

    def __getitem__(self, index):
        return self._list()[index]

    def __len__(self) -> int:
        return len(self._list())
