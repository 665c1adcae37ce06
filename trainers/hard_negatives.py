"""Hard negatives for a trial's pairs (``hard_negatives`` a pair; 0: in-batch negatives only).

For each pair's document, its mined BM25 neighbours in the pretraining corpus
(``doctune_core.data.neighbours``: near duplicates excluded) are made into views by the trial's
own recipe, and each neighbour's view B joins the batch as a negative: the same kind of text as
the positive (a crop against crops, a document without a span against documents without a span),
so telling them apart takes reading what they say, not how they were cut. A neighbour that gives
no pair is passed over for the next; a document with too few neighbours that do gives no pair
(``PairStream`` counts it with the skipped). The contrastive loss ranks every anchor against all
positives and all hard negatives of the batch (``trainers.losses.info_nce``; DPR, Karpukhin et
al. 2020, Sec. 3.2: one BM25 negative a question, shared in the batch).
"""

from __future__ import annotations

import bisect
import functools
import random

from doctune_core.data.corpus import PreparedCorpus
from doctune_core.data.neighbours import Neighbours
from trainers.pairs import PairBuilder

CACHED_GROUPS = 64  # row groups of neighbours' documents held at once (about 16k documents)


class HardNegatives:
    """``views(row, rng)``: ``count`` negatives for corpus row ``row``'s pair, or None."""

    def __init__(self, corpus: PreparedCorpus, neighbours: Neighbours, count: int, builder: PairBuilder) -> None:
        if len(neighbours.rows) != corpus.rows:
            raise ValueError(f"neighbours of {len(neighbours.rows)} rows for a corpus of {corpus.rows}")
        self.corpus, self.neighbours, self.count, self.builder = corpus, neighbours, count, builder
        self._group_starts = [0]
        for group in corpus.row_groups:
            self._group_starts.append(self._group_starts[-1] + group.rows)
        self._read_group = functools.lru_cache(maxsize=CACHED_GROUPS)(self._read_group_at)

    def views(self, row: int, rng: random.Random) -> list[str] | None:
        found: list[str] = []
        for neighbour in self.neighbours.of(row):
            pair = self.builder(self.document(neighbour), rng)
            if pair is not None:
                found.append(pair[1])
                if len(found) == self.count:
                    return found
        return None

    def document(self, row: int) -> list[str]:
        """Corpus row ``row``'s sentences."""
        group = bisect.bisect_right(self._group_starts, row) - 1
        return self._read_group(group)[row - self._group_starts[group]]

    def _read_group_at(self, group: int) -> list[list[str]]:
        return self.corpus.read_group(self.corpus.row_groups[group])
