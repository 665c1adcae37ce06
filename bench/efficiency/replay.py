"""Trials run one after another on a table: a trial looks its numbers up instead of training.

A replay is a trace: after every evaluation round any trial runs, the training steps consumed so far,
the trials started so far, the best validation objective of every (trial, round) seen so far, and the
test objective at the (trial, round) holding that best (ties: the earlier one) -- the product picks
each trial's checkpoint with the best validation objective and reports its test score. A configuration
whose objective cells are empty failed: it still costs its steps, never holds the best (it counts as
-inf), and ASHA leaves it out of its rung percentiles (Ray's ``nanpercentile`` does the same with a NaN
report).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

from bench.efficiency.asha import AshaBracket
from bench.efficiency.table import Table


class Event(NamedTuple):
    """The state of a search after one evaluation round of one trial."""

    consumed: int  # training steps consumed so far, over every trial
    trials: int  # trials started so far, this one included (each pays a start-up)
    best_val: float  # best validation objective of any (trial, round) so far; -inf while none succeeded
    test_of_pick: float  # test objective at that (trial, round); NaN while none succeeded


Trace = list[Event]


class Replay:
    """Trials run one after another on a table, with or without ASHA; ``events`` is the trace,
    ``configs`` the configuration each trial ran and ``rounds`` how many rounds it ran."""

    def __init__(self, table: Table, asha: bool) -> None:
        self.table = table
        self.bracket = AshaBracket(table.rounds, table.asha) if asha else None
        self.events: Trace = []
        self.configs: list[int] = []
        self.rounds: list[int] = []
        self._best, self._pick, self._consumed = -math.inf, math.nan, 0

    def run(self, config: int, rounds: int | None = None) -> float:
        """Run one trial of ``config``, for ``rounds`` rounds when given (a decision taken before) or
        until ASHA stops it; the validation objective of its last round (NaN: failed)."""
        trial = len(self.configs)
        self.configs.append(config)
        self.rounds.append(0)
        for r in range(self.table.rounds if rounds is None else rounds):
            value = float(self.table.val[config, r])
            self._consumed += self.table.eval_every
            if value > self._best:
                self._best, self._pick = value, float(self.table.test[config, r])
            self.events.append(Event(self._consumed, trial + 1, self._best, self._pick))
            self.rounds[trial] += 1
            if rounds is None and self.bracket is not None and self.bracket.on_trial_result(trial, r + 1, value):
                self.bracket.on_trial_complete(trial, r + 1, value)
                break
        return value


def replay_order(table: Table, order: Sequence[int], asha: bool = False) -> Replay:
    """The configurations ``order`` (indices into ``table.configs``) run in turn."""
    replay = Replay(table, asha)
    for config in order:
        replay.run(config)
    return replay


def replay_decided(table: Table, configs: Sequence[int], rounds: Sequence[int]) -> Replay:
    """A replay rebuilt from what it ran: trial ``k`` ran ``configs[k]`` for ``rounds[k]`` rounds."""
    replay = Replay(table, asha=False)
    for config, count in zip(configs, rounds, strict=True):
        replay.run(config, count)
    return replay
