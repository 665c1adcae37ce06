"""Where a search's wall time goes: its phases, and inside the trials, training and evaluation.

The driver times its own phases (inputs, Ray start, base stage, evaluator start, baseline, trials,
report-only tasks, reports); each trial reports the seconds its training steps took
(``train_seconds``) and the seconds it waited for its scores (``eval_seconds``) every round, and
Tune adds the trial's own wall time (``time_total_s``: from the trial function's start, so its
worker group's start-up included). What is neither training, evaluation nor the base stage is
the search's overhead: Ray and worker start-up, checkpoint writes, reporting, the leaderboard and
the export.

With several trials at once, trial seconds are turned into wall seconds by dividing by the
trials' mean concurrency (their summed wall time over the trials phase, at least 1): each
category's share of the trials phase is its share of the trials' own time. With one trial at a
time the split is exact, and the gaps between trials (trial actor start, Optuna) count as
overhead. ``timings.json`` in the run directory holds all of it, for the call that wrote it: a
resumed search counts the rounds it ran itself, not those of trials that ran before it was
interrupted (their seconds went with the earlier call, whose wall time is not known here).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from doctune_core.run_layout import TIMINGS_FILE

EVALUATION_PHASES = ("baseline", "report-only tasks", "noise")


class PhaseClock:
    """Wall-clock seconds per named phase, from the clock's creation."""

    def __init__(self) -> None:
        self.began = time.monotonic()
        self.started_at = time.time()  # the epoch second Tune's result timestamps are compared with
        self.phases: dict[str, float] = {}

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        began = time.monotonic()
        try:
            yield
        finally:
            self.phases[name] = self.phases.get(name, 0.0) + time.monotonic() - began

    def summary(self, trials: dict[str, float]) -> dict:
        """The breakdown; ``trials`` holds the trials' summed ``train_seconds``, ``eval_seconds``
        and ``wall_seconds`` (see :func:`trial_seconds`)."""
        wall = time.monotonic() - self.began
        in_trials = self.phases.get("trials", 0.0)
        concurrency = max(1.0, trials["wall_seconds"] / in_trials) if in_trials > 0 else 1.0
        training = trials["train_seconds"] / concurrency
        evaluation = trials["eval_seconds"] / concurrency + sum(self.phases.get(p, 0.0) for p in EVALUATION_PHASES)
        base = self.phases.get("base stage", 0.0)
        confirmation = self.phases.get("confirmation", 0.0)  # whole trials again (search.confirm_seeds)
        overhead = max(0.0, wall - training - evaluation - base - confirmation)
        inside = max(0.0, trials["wall_seconds"] - trials["train_seconds"] - trials["eval_seconds"])
        return {
            "wall_seconds": wall,
            "phases": self.phases,
            "trials": {
                **trials,
                "start_up_checkpoints_and_reports_seconds": inside,
                "mean_concurrency": concurrency,
            },
            "shares": {
                "training": training / wall,
                "evaluation": evaluation / wall,
                "base stage": base / wall,
                "confirmation": confirmation / wall,
                "overhead": overhead / wall,
            },
        }


def trial_seconds(results, since: float = 0.0) -> dict[str, float]:
    """``train_seconds`` and ``eval_seconds`` summed over every round of every trial of a Tune
    result grid, and ``wall_seconds``: each trial's own wall time (its last ``time_total_s``).
    Only rounds reported at or after ``since`` (epoch seconds, Tune's ``timestamp``) count: a
    resumed search leaves out the trials that ran before it (Tune restarts an interrupted trial,
    whose ``time_total_s`` then starts again)."""
    sums = {"train_seconds": 0.0, "eval_seconds": 0.0, "wall_seconds": 0.0}
    for result in results:
        frame = result.metrics_dataframe
        if frame is None:
            continue
        if "timestamp" in frame:
            frame = frame[frame["timestamp"] >= int(since)]  # Tune's timestamps are whole seconds
        for column in ("train_seconds", "eval_seconds"):
            if column in frame:
                sums[column] += float(frame[column].fillna(0.0).sum())
        if "time_total_s" in frame and len(frame):
            sums["wall_seconds"] += float(frame["time_total_s"].dropna().max())
    return sums


def write_timings(run_dir: Path, summary: dict) -> str:
    """Write ``timings.json``; returns the one-line account for the terminal."""
    (run_dir / TIMINGS_FILE).write_text(json.dumps(summary, indent=2))
    shares = ", ".join(f"{name} {share:.0%}" for name, share in summary["shares"].items() if share >= 0.005)
    return f"wall time {summary['wall_seconds']:.0f} s: {shares} ({run_dir / TIMINGS_FILE})"
