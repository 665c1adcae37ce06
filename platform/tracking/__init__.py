"""Experiment trackers: a search recorded where researchers keep their runs (``tracking:`` in the
spec; docs/decisions/experiment-tracking.md).

The search is one run, each trial a run nested under it. A trial's run gets its hyperparameters and,
every evaluation round, what steers the search: the validation objective and task scores, the
losses and tokens/s (``steering_metrics``). Test scores are logged once, when the search is over,
for the round each trial's leaderboard row chose, so no tracking UI offers a per-round test curve
to select on (TensorBoard follows the same rule: ``ValidationOnlyTensorBoard``). The search's run
then gets the leaderboard, the report, the plots and ``search.json`` as artifacts, and the winner
as a model.

A tracker that fails (a server that does not answer, a full disk) warns once and is switched off;
the search goes on and loses nothing (``Guarded``). What a tracker has logged is kept in the run
directory (``tracking.json``), so a resumed search continues the same runs and logs no round twice.

A tracker is one class with ``start``, ``round`` and ``finish`` (``base.Tracker``), registered by
name (``trackers``: ``mlflow_runs`` the MLflow one, ``wandb_runs`` the Weights & Biases one; another
package's through the entry point group ``doctune.trackers``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from contextlib import contextmanager
from numbers import Real
from pathlib import Path

from ray import tune
from ray.tune.logger import TBXLoggerCallback

from doctune_core.run_files import RunFiles
from platform.spec.schema import TrackerSettings
from platform.tracking.base import (
    SEARCH_ARTIFACTS,
    STATE_FILE,
    Tracker,
    TrackerState,
    chosen_round_scores,
    search_settings,
)
from trainers.checkpoint import STEPS_FILE

log = logging.getLogger(f"doctune.{__name__}")

ROUND_BOOKKEEPING = ("eval_round", "report_step", "step")  # numbers, but not measurements


def is_test_metric(key: str) -> bool:
    """Whether a reported key is a test score (``test/<task>/<metric>``, ``test_objective``)."""
    return key.startswith("test/") or key.startswith("test_")


def steering_metrics(result: dict) -> dict[str, float]:
    """The finite numbers of one round's report that a tracker may show every round: everything but
    the test scores and the bookkeeping keys."""
    return {
        key: float(value)
        for key, value in result.items()
        if isinstance(value, Real)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and not is_test_metric(key)
        and key not in ROUND_BOOKKEEPING
    }


class Guarded:
    """A tracker whose first failure prints one warning and switches it off for the rest of the search."""

    def __init__(self, tracker: Tracker) -> None:
        self.tracker = tracker
        self.failed = False

    def call(self, method: str, *args) -> None:
        if self.failed:
            return
        try:
            getattr(self.tracker, method)(*args)
        except Exception as err:  # a tracker never fails a search
            self.failed = True
            reason = next(iter(str(err).strip().splitlines()), "")  # one line: some clients' errors run on
            log.warning(
                f"doctune: warning: {self.tracker.describe()} failed ({type(err).__name__}: {reason}); the search goes "
                "on without it, its run directory complete",
            )


class Trackers:
    """The spec's trackers, each guarded; empty when the spec names none."""

    def __init__(self, trackers: list[Tracker]) -> None:
        self.guarded = [Guarded(tracker) for tracker in trackers]

    def start(self, spec: dict, profile: str, run_dir: Path) -> None:
        for tracker in self.guarded:
            tracker.call("start", spec, profile, run_dir)

    def round(self, trial: str, hyperparameters: dict, result: dict) -> None:
        step = result.get("step")
        if not isinstance(step, Real):  # not a round's report (Tune's own bookkeeping)
            return
        metrics = steering_metrics(result)
        for tracker in self.guarded:
            tracker.call("round", trial, hyperparameters, int(step), metrics)

    def finish(self, rows: list, run_dir: Path, best_dir: Path | None) -> None:
        for tracker in self.guarded:
            tracker.call("finish", rows, run_dir, best_dir)

    @contextmanager
    def fed(self, fixed: dict) -> Iterator[tune.Callback | None]:
        """While the block runs, every round Tune receives reaches these trackers (each trial's
        hyperparameters: ``fixed`` and its own) through the callback yielded, None without trackers."""
        global _fed
        if not self.guarded:
            yield None
            return
        _fed = (self, fixed)
        try:
            yield RoundsToTrackers()
        finally:
            _fed = None


_fed: tuple[Trackers, dict] | None = None  # the trackers a search of this process feeds (``Trackers.fed``)


class RoundsToTrackers(tune.Callback):
    """Each trial's reports, as Tune receives them in the driver, to the trackers a running
    ``Trackers.fed`` block registered. It holds none itself: Tune saves its callbacks with the
    experiment, and a resumed search, perhaps in another run directory, feeds its own."""

    def on_trial_result(self, iteration: int, trials: list, trial, result: dict, **info) -> None:
        if _fed is not None:
            trackers, fixed = _fed
            trackers.round(trial.trial_id, {**fixed, **trial.config}, result)


class ValidationOnlyTensorBoard(TBXLoggerCallback):
    """Tune's TensorBoard logger without the per-round test scores (they stay in each round's
    ``scores.json``; the leaderboard reports test for the chosen round only), and with every training
    step's values, read from the round's checkpoint (``steps.json``: its loss terms, views' cosines,
    gradient norm) as ``step/<name>`` on the axis of training steps (the rounds' own scalars count
    rounds)."""

    def __init__(self, run_files: RunFiles) -> None:
        super().__init__()
        self._run_files = run_files
        self._stepped: set[tuple[str, str]] = set()  # (trial, checkpoint) whose steps are logged

    def log_trial_result(self, iteration: int, trial, result: dict) -> None:
        kept = {key: value for key, value in result.items() if not is_test_metric(key)}
        super().log_trial_result(iteration, trial, kept)
        files = getattr(self, "_run_files", None)  # None: restored from a search saved before step logging
        checkpoint = files.relative(str(result.get("checkpoint", ""))) if files is not None else None
        if checkpoint is None or (trial.trial_id, checkpoint) in self._stepped:  # a round reported again
            return
        self._stepped.add((trial.trial_id, checkpoint))
        if not files.is_file(f"{checkpoint}/{STEPS_FILE}"):  # a checkpoint of before steps.json
            return
        writer = self._trial_writer[trial]
        for entry in files.read_json(f"{checkpoint}/{STEPS_FILE}"):
            for name, value in entry.items():
                if name != "step":
                    writer.add_scalar(f"step/{name}", value, global_step=entry["step"])
        writer.flush()


def open_trackers(tracking: TrackerSettings, name: str, run_dir: Path) -> Trackers:
    """The trackers a spec's ``tracking:`` section names, for the search ``name`` in ``run_dir``."""
    from platform.tracking.trackers import TRACKERS

    return Trackers([TRACKERS[tracker](settings, name, run_dir) for tracker, settings in tracking.items()])


__all__ = [
    "SEARCH_ARTIFACTS",
    "STATE_FILE",
    "Guarded",
    "RoundsToTrackers",
    "Tracker",
    "TrackerState",
    "Trackers",
    "ValidationOnlyTensorBoard",
    "chosen_round_scores",
    "is_test_metric",
    "open_trackers",
    "search_settings",
    "steering_metrics",
]
