"""Where a search's wall time goes: its phases, and inside the trials, training and evaluation.

The driver times its own phases (inputs, Ray start, base stage, evaluator start, baseline, trials,
report-only tasks, reports); each trial reports the seconds its training steps took
(``train_seconds``) and the seconds it waited for its scores (``eval_seconds``) every round. What
is neither training, evaluation nor the base stage is the search's overhead: Ray and worker
start-up, checkpoint writes, reporting, the leaderboard and the export. ``timings.json`` in the
run directory holds all of it; with several trials at once the trial sums can exceed the phase
that contains them, and the overhead is then a lower bound.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

TIMINGS_FILE = "timings.json"
EVALUATION_PHASES = ("baseline", "report-only tasks")


class PhaseClock:
    """Wall-clock seconds per named phase, from the clock's creation."""

    def __init__(self) -> None:
        self.began = time.monotonic()
        self.phases: dict[str, float] = {}

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        began = time.monotonic()
        try:
            yield
        finally:
            self.phases[name] = self.phases.get(name, 0.0) + time.monotonic() - began

    def summary(self, train_seconds: float, eval_seconds: float) -> dict:
        """The breakdown; ``train_seconds`` and ``eval_seconds`` are the trials' sums."""
        wall = time.monotonic() - self.began
        evaluation = eval_seconds + sum(self.phases.get(p, 0.0) for p in EVALUATION_PHASES)
        base = self.phases.get("base stage", 0.0)
        overhead = max(0.0, wall - train_seconds - evaluation - base)
        return {
            "wall_seconds": wall,
            "phases": self.phases,
            "trials": {"train_seconds": train_seconds, "eval_seconds": eval_seconds},
            "shares": {
                "training": train_seconds / wall,
                "evaluation": evaluation / wall,
                "base stage": base / wall,
                "overhead": overhead / wall,
            },
        }


def trial_seconds(results) -> tuple[float, float]:
    """(training, evaluation) seconds summed over every round of every trial of a Tune result grid."""
    sums = {"train_seconds": 0.0, "eval_seconds": 0.0}
    for result in results:
        frame = result.metrics_dataframe
        for column in sums:
            if frame is not None and column in frame:
                sums[column] += float(frame[column].fillna(0.0).sum())
    return sums["train_seconds"], sums["eval_seconds"]


def write_timings(run_dir: Path, summary: dict) -> str:
    """Write ``timings.json``; returns the one-line account for the terminal."""
    (run_dir / TIMINGS_FILE).write_text(json.dumps(summary, indent=2))
    shares = ", ".join(f"{name} {share:.0%}" for name, share in summary["shares"].items() if share >= 0.005)
    return f"wall time {summary['wall_seconds']:.0f} s: {shares} ({run_dir / TIMINGS_FILE})"
