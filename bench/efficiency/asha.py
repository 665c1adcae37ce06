"""Asynchronous successive halving over a table's evaluation rounds, as Ray Tune runs it.

A replica of Ray Tune's ``ASHAScheduler`` rather than the scheduler itself: importing ``ray.tune``
takes seconds, longer than replaying thousands of seeds of the methods without TPE, and the
scheduler is fed ``Trial`` objects. ``tests/bench/test_asha_against_ray.py`` holds the replica to
Ray's decisions: it drives the installed ``ASHAScheduler`` (built as ``platform/search_path/tuner.py`` builds it)
with the same results and requires the same stop/continue decision at every one, so a Ray upgrade
that changes ASHA fails there instead of drifting from the replay.
"""

from __future__ import annotations

import warnings

import numpy as np

from bench.efficiency.table import Asha


class AshaBracket:
    """Ray Tune 2.60's ``AsyncHyperBandScheduler`` with one bracket (``_Bracket`` with ``s = 0``),
    ``time_attr`` = the evaluation round, ``mode="max"`` and ``stop_last_trials``."""

    def __init__(self, max_t: int, asha: Asha) -> None:
        self.max_t = max_t
        self.rf = asha.reduction_factor
        min_t = asha.grace_period
        count = int(np.log(max_t / min_t) / np.log(self.rf) + 1)
        self.rungs: list[tuple[float, dict[int, float]]] = [(min_t * self.rf**k, {}) for k in reversed(range(count))]

    def on_trial_result(self, trial: int, round_: int, value: float) -> bool:
        """True when the trial is to stop after this round (Ray's ``TrialScheduler.STOP``)."""
        return round_ >= self.max_t or self._bracket_result(trial, round_, value)

    def on_trial_complete(self, trial: int, round_: int, value: float) -> None:
        """Ray hands the stopped trial's last result to the bracket once more (it can only fill rung ``max_t``)."""
        self._bracket_result(trial, round_, value)

    def _bracket_result(self, trial: int, round_: int, value: float) -> bool:
        for milestone, recorded in self.rungs:
            if round_ < milestone or trial in recorded:
                continue
            stop = False
            if recorded:
                with warnings.catch_warnings():  # every recorded value NaN: no cutoff, as in Ray
                    warnings.simplefilter("ignore", RuntimeWarning)
                    cutoff = np.nanpercentile(list(recorded.values()), (1 - 1 / self.rf) * 100)
                stop = bool(value < cutoff)
            recorded[trial] = value
            return stop
        return False
