"""A finished search as a caller reads it: ``doctune.search`` returns a ``Leaderboard``.

The driver records its leaderboard in ``leaderboard.json`` (``platform.results.leaderboard``); this module
is that record's public, typed and read-only view, so a notebook, a script or a type checker reads
a run without the driver. ``Leaderboard.read(run_dir)`` opens a run finished earlier.

Rows are ranked by the validation objective (the score that chose each row's checkpoint), and the
rows no trial trained rank among them: the base as given and converted (baselines) and the encoders
a user already has (references). ``Leaderboard.best`` is the search's winner, never one of those.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from doctune_core.noise import Gain
from doctune_core.run_layout import LEADERBOARD_FILE
from evaluators.readings import ReadingCount
from evaluators.references import RowKind, row_kind, winner


@dataclass(frozen=True)
class LeaderboardRow:
    """One row of a leaderboard: a trial's chosen checkpoint, a baseline or a reference encoder.

    ``objective`` is the validation objective that chose the row's checkpoint and ranks it;
    ``test_objective`` and each task's ``test`` scores are what the row reports, read once the search
    had chosen, for the baselines, the references and the winner only (None on the other trials).
    ``gains``, ``long_task_gains`` and ``task_gains`` are the winner's alone (empty on other rows):
    its test gain over each baseline row (the objective; the long-document tasks pooled; each task
    over each baseline and reference), each a ``Gain`` with its 95% interval and its verdict words
    (``Gain.describe()``: "beyond noise", "within noise", "too few items to decide", "seed noise not
    included")."""

    trial: str
    status: str
    objective: float | None
    test_objective: float | None
    step: int | None
    # a trial's checkpoint (a path on the run's file system or bucket); a baseline's model directory
    checkpoint: str | None
    hyperparameters: Mapping[str, Any]
    # task -> part ("val", "test") -> metric -> value (``main`` is the task's main score)
    scores: Mapping[str, Mapping[str, Mapping[str, Any]]]
    # each named objective's validation value (one, equal to ``objective``, in a single-objective search)
    objectives: Mapping[str, float]
    pareto: bool
    gains: Mapping[str, Gain]
    long_task_gains: Mapping[str, Gain]
    task_gains: Mapping[str, Mapping[str, Gain]]
    # the winner's configuration retrained with new seeds (``search.confirm_seeds``); empty otherwise
    confirmation: Mapping[str, Any]
    # PBT: each time the trial went on from another trial's checkpoint
    lineage: tuple[Mapping[str, Any], ...]
    # the winner's: how many earlier readings on this cache read the locked parts its test verdicts rest on
    # (None where no locked part was read: a validation-only search, or a row other than the winner)
    locked_reading: ReadingCount | None = None
    # a trial's: per short task, the mean cosine between its and its untrained start's embeddings of the
    # task's short validation texts (1.0: training left them where they were); empty on the other rows
    start_cosine: Mapping[str, float] = field(default_factory=dict)

    @property
    def kind(self) -> RowKind:
        """``trial``, ``baseline`` (the base encoder untrained) or ``reference`` (what a user already has)."""
        return row_kind(self.trial)

    def score(self, task: str, part: Literal["val", "test"] = "val") -> float | None:
        """``task``'s main score on ``part`` (validation by default); None where it was not scored."""
        value = self.scores.get(task, {}).get(part, {}).get("main")
        return None if value is None else float(value)

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> LeaderboardRow:
        """A row of ``leaderboard.json``."""
        return cls(
            trial=record["trial"],
            status=record["status"],
            objective=record["objective"],
            test_objective=record.get("test_objective"),
            step=record["step"],
            checkpoint=record["checkpoint"],
            hyperparameters=dict(record["hyperparameters"]),
            scores=dict(record.get("scores", {})),
            objectives=dict(record.get("objectives", {})),
            pareto=bool(record.get("pareto", False)),
            gains=_gains(record.get("gains", {})),
            long_task_gains=_gains(record.get("long_task_gains", {})),
            task_gains={row: _gains(tasks) for row, tasks in record.get("task_gains", {}).items()},
            confirmation=dict(record.get("confirmation", {})),
            lineage=tuple(record.get("lineage", ())),
            locked_reading=ReadingCount.from_record(record["locked_reading"]) if record.get("locked_reading") else None,
            start_cosine=dict(record.get("start_cosine", {})),
        )


def _gains(records: Mapping[str, Mapping[str, Any]]) -> dict[str, Gain]:
    return {name: Gain.from_record(dict(record)) for name, record in records.items()}


@dataclass(frozen=True)
class Leaderboard:
    """A search's rows, ranked by the validation objective, and where its run is kept.

    Example::

        board = doctune.search("docsplit_long", profile="smoke")
        print(board.best.trial, board.best.objective, board.best.test_objective)
        for over, gain in board.best.gains.items():
            print(over, gain.describe())
    """

    rows: tuple[LeaderboardRow, ...]
    run_dir: Path
    # the ranking's noise check (``platform.results.ranking``): whether the trials differ beyond scoring noise;
    # None where it was not assessed
    noise: Mapping[str, Any] | None = None

    @property
    def best(self) -> LeaderboardRow:
        """The winner: the trial with the best validation objective (a baseline or a reference may
        rank above it, but is never the winner). Raises ``ValueError`` where no trial was scored."""
        best = winner(self.rows)
        if best is None:
            raise ValueError(f"no trial of the run in {self.run_dir} was scored; each row's status says why")
        return best

    @property
    def trials(self) -> tuple[LeaderboardRow, ...]:
        """The trials' rows, ranked (those that failed or were never scored last)."""
        return tuple(row for row in self.rows if row.kind == "trial")

    @property
    def baselines(self) -> tuple[LeaderboardRow, ...]:
        """The base encoder untrained: as the spec names it, and converted where the spec converts it."""
        return tuple(row for row in self.rows if row.kind == "baseline")

    @property
    def references(self) -> tuple[LeaderboardRow, ...]:
        """Encoders a user already has (``evaluation.references``), scored on the same items."""
        return tuple(row for row in self.rows if row.kind == "reference")

    @classmethod
    def read(cls, run_dir: str | Path) -> Leaderboard:
        """The leaderboard of the run in ``run_dir`` (its ``leaderboard.json``). Raises
        ``FileNotFoundError`` where the run has written none yet."""
        run_dir = Path(run_dir)
        record = json.loads((run_dir / LEADERBOARD_FILE).read_text())
        rows = record["rows"] if isinstance(record, dict) else record  # early runs wrote a bare list
        noise = record.get("noise") if isinstance(record, dict) else None
        return cls(tuple(LeaderboardRow.from_record(row) for row in rows), run_dir, noise)
