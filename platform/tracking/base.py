"""What every tracker backend shares (``trackers.mlflow_runs``, ``trackers.wandb_runs``): the ``Tracker``
it is, the registry it is found in (``TRACKERS``, declared by the spec: ``platform.spec.trackers``),
the state it keeps in the run directory, and what a search's and a row's runs receive.
``platform.tracking`` guards the backends and hands them the rounds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar, Protocol

from doctune_core.run_layout import (
    LEADERBOARD_CSV,
    LEADERBOARD_FILE,
    PLOTS_DIR,
    REPORT_FILE,
    SEARCH_RECORD,
    TIMINGS_FILE,
)
from platform.rundir.layout import write_atomic

STATE_FILE = "tracking.json"
# every file of the run directory that describes the whole search (the plots directory too)
SEARCH_ARTIFACTS = (SEARCH_RECORD, LEADERBOARD_FILE, LEADERBOARD_CSV, REPORT_FILE, TIMINGS_FILE, PLOTS_DIR)


def search_settings(spec: dict, profile: str) -> dict:
    """The resolved spec (as ``search.json`` records it) as a search run's settings (the profiles,
    study and tracking sections left out)."""
    settings = {k: v for k, v in spec.items() if k not in ("profiles", "study", "tracking")}
    return {**settings, "profile": profile}


def chosen_round_scores(row, logged_rounds: bool) -> dict[str, float]:
    """What a row's run gets once the search is over: the test objective and test scores of its chosen
    round, and, for a row whose rounds were never logged (a baseline), its validation ones too."""
    scores = {"test_objective": row.test_objective}
    splits = ("test",) if logged_rounds else ("val", "test")
    if not logged_rounds:
        scores["objective"] = row.objective
    for task, parts in row.scores.items():
        for split in splits:
            values = parts.get(split)
            if isinstance(values, dict):
                scores |= {f"{split}/{task}/{k}": v for k, v in values.items() if isinstance(v, float | int)}
    return {key: value for key, value in scores.items() if value is not None}


class TrackerState:
    """One tracker's part of the run directory's ``tracking.json``, re-read on every call (the Tune
    callback and the driver may hold different copies of a tracker)."""

    def __init__(self, run_dir: Path, key: str) -> None:
        self.path, self.key = Path(run_dir) / STATE_FILE, key

    def load(self) -> dict:
        if not self.path.exists():
            return {}
        return json.loads(self.path.read_text()).get(self.key, {})

    def save(self, state: dict) -> None:
        whole = json.loads(self.path.read_text()) if self.path.exists() else {}
        write_atomic(self.path, json.dumps(whole | {self.key: state}, indent=2))


class Tracker(Protocol):
    """One tracking backend, registered by name in ``TRACKERS`` (a spec's ``tracking:`` key). It
    declares its ``settings`` (a frozen dataclass: the spec's ``tracking.<name>`` is built into it),
    the module its client library installs (``package``, checked before a search starts) and how to
    install it (``install``), and is made with ``(settings, spec_name, run_dir)``. Each call may
    raise; ``Guarded`` turns the first failure into a warning."""

    settings: ClassVar[type]
    package: ClassVar[str]
    install: ClassVar[str]

    def __init__(self, settings: Any, spec_name: str, run_dir: Path) -> None: ...

    def describe(self) -> str: ...

    def start(self, spec: dict, profile: str, run_dir: Path) -> None:
        """The search's run (created, or found again on a resume), with the resolved spec's settings
        (``spec``: the resolved spec as ``search.json`` records it)."""

    def round(self, trial: str, hyperparameters: dict, step: int, metrics: dict[str, float]) -> None:
        """One evaluation round of ``trial`` (its run created on its first round)."""

    def finish(self, rows: list, run_dir: Path, best_dir: Path | None) -> None:
        """Each row's test scores at its chosen round, the search's artifacts, the winner's model."""
