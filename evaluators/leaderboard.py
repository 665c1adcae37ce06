"""A search's leaderboard as one row type and one reader: ``LeaderboardRow``, built by the driver's
results side (``platform.results``), and ``Leaderboard``, the rows ranked with the ranking's noise.
``write_leaderboard`` writes a run's ``leaderboard.json`` and ``leaderboard.csv``; ``Leaderboard.read``
reads it back, for the report, the export, the command line and a user (``doctune.Leaderboard``). It
lives beside the winner rule (``evaluators.references``), below the driver, so that an installed
doctune's callers and their type checkers read the same type the driver writes.

Rows are ranked by the validation objective (the score that chose each row's checkpoint), and the
rows no trial trained rank among them: the base as given and converted (baselines) and the encoders
a user already has (references). ``Leaderboard.best`` is the search's winner, never one of those.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

from doctune_core.noise import Gain, TaskGain
from doctune_core.run_layout import LEADERBOARD_CSV, LEADERBOARD_FILE
from evaluators.readings import ReadingCount
from evaluators.references import BASELINE_PREFIX, RowKind, row_kind, winner
from evaluators.scores import part

BASELINE_ID = BASELINE_PREFIX  # the base encoder as the spec names it
CONVERTED_BASELINE_ID = "baseline-converted"  # the same after the backbone conversion, untrained
INTERPOLATED_BASELINE_ID = "baseline-interpolated"  # converted with interpolated positions, untrained


@dataclass
class LeaderboardRow:
    """One row of a leaderboard: a trial's chosen checkpoint, a baseline or a reference encoder.

    ``objective`` (and ``objectives``) are the validation objective that chose the row's checkpoint
    and ranks it; ``test_objective`` and each task's ``test`` scores (``evaluators.scores``) are what
    the row reports, read once the search had chosen, for the baselines, the references and the
    winner only (None on the other trials). ``gains``, ``long_task_gains`` and ``task_gains`` are
    the winner's alone (empty on other rows): its test gain over each baseline row (the objective;
    the long-document tasks pooled; each task over each baseline and reference, with its length
    buckets), each a ``Gain`` with its 95% interval and its verdict words (``Gain.describe()``:
    "beyond noise", "within noise", "too few items to decide", "seed noise not included")."""

    trial: str
    status: str
    objective: float | None
    step: int | None
    # a trial's: its path on the run's file system (``RunFiles.path``: a bucket's path where the run is
    # stored there); a baseline's: the model directory
    checkpoint: str | None
    hyperparameters: dict
    # task -> part ("val", "test") -> metric -> value (``main`` is the task's main score)
    scores: dict[str, dict] = field(default_factory=dict)
    # each named objective's value (a single-objective search has one, equal to ``objective``)
    objectives: dict[str, float] = field(default_factory=dict)
    pareto: bool = False  # on the Pareto front of the trials (multi-objective searches)
    test_objective: float | None = None
    # the winner's test-objective gain over each baseline row, paired over the test items
    gains: dict[str, Gain] = field(default_factory=dict)
    # the same on the objective's long-document tasks pooled with their objective weights
    long_task_gains: dict[str, Gain] = field(default_factory=dict)
    # the winner's test gain on each task over each baseline and reference row that scored it: row id -> task
    task_gains: dict[str, dict[str, TaskGain]] = field(default_factory=dict)
    # the winner's configuration retrained with new seeds (search.confirm_seeds): their test objective's
    # mean ± std, and the winner's own run apart (``platform.results.leaderboard.confirmation_record``)
    confirmation: dict = field(default_factory=dict)
    # PBT: each time the trial went on from another trial's checkpoint (trainers.population.exploits)
    lineage: list[dict] = field(default_factory=list)
    # the winner's: how often the locked parts its test verdicts rest on were read before on this cache
    # (None where no locked part was read: a validation-only search, or a row other than the winner)
    locked_reading: ReadingCount | None = None
    # a trial's: per short task, the mean cosine between its and its untrained start's embeddings of the
    # task's short validation texts (``evaluators.pool.Evaluator.start_cosine``: 1.0 unmoved); reported only
    start_cosine: dict[str, float] = field(default_factory=dict)

    @property
    def kind(self) -> RowKind:
        """``trial``, ``baseline`` (the base encoder untrained) or ``reference`` (what a user already has)."""
        return row_kind(self.trial)

    def score(self, task: str, part_name: Literal["val", "test"] = "val") -> float | None:
        """``task``'s main score on ``part_name`` (validation by default); None where it was not scored."""
        value = part(self.scores, task, part_name).get("main")
        return None if value is None else float(value)

    def test_score(self, task: str) -> float | None:
        return self.score(task, "test")

    def flat(self, tasks: list[str]) -> dict:
        """The row as a line of ``leaderboard.csv``."""
        out = {
            "trial": self.trial,
            "status": self.status,
            "objective": self.objective,
            "test_objective": self.test_objective,
            "step": self.step,
            "checkpoint": self.checkpoint,
        }
        if len(self.objectives) > 1:
            out |= {f"objective.{name}": value for name, value in self.objectives.items()}
            out["pareto"] = self.pareto
        if self.lineage:
            out["lineage"] = describe_lineage(self.lineage)
        out |= {f"hp.{k}": v for k, v in sorted(self.hyperparameters.items())}
        for task in tasks:
            out[task] = self.test_score(task)
            out[f"{task}.se"] = part(self.scores, task, "test").get("main_se")
            out[f"{task}.val"] = part(self.scores, task, "val").get("main")
        return out

    def record(self) -> dict:
        """The row as ``leaderboard.json`` holds it."""
        record = {f.name: getattr(self, f.name) for f in fields(self)}
        return record | {
            "gains": {name: gain.record() for name, gain in self.gains.items()},
            "long_task_gains": {name: gain.record() for name, gain in self.long_task_gains.items()},
            "task_gains": {
                row: {task: gain.record() for task, gain in by_task.items()} for row, by_task in self.task_gains.items()
            },
            "locked_reading": self.locked_reading.record() if self.locked_reading else {},
        }

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> LeaderboardRow:
        """A row of ``leaderboard.json``."""
        known = {f.name for f in fields(cls)}
        row = cls(**{name: value for name, value in record.items() if name in known})
        row.gains = {name: Gain.from_record(gain) for name, gain in record.get("gains", {}).items()}
        row.long_task_gains = {name: Gain.from_record(gain) for name, gain in record.get("long_task_gains", {}).items()}
        row.task_gains = {
            over: {task: TaskGain.from_record(gain) for task, gain in by_task.items()}
            for over, by_task in record.get("task_gains", {}).items()
        }
        reading = record.get("locked_reading")
        row.locked_reading = ReadingCount.from_record(reading) if reading else None
        return row


def describe_lineage(lineage: list[dict]) -> str:
    """A PBT trial's exploits in a line: ``round 1: from <trial> (step 2); ...``."""
    return "; ".join(f"round {e['round']}: from {e['donor']} (step {e['step']})" for e in lineage)


def is_baseline(row: LeaderboardRow) -> bool:
    """Whether no trial trained the row: a baseline (the base as given or converted) or a reference."""
    return row.kind != "trial"


def is_reference(row: LeaderboardRow) -> bool:
    return row.kind == "reference"


def _rank_key(row: LeaderboardRow) -> float:
    return -row.objective if row.objective is not None and math.isfinite(row.objective) else math.inf


def write_leaderboard(
    rows: list[LeaderboardRow], run_dir: Path, tasks: list[str], noise: dict | None = None
) -> list[LeaderboardRow]:
    """``leaderboard.csv`` (a row per line) and ``leaderboard.json``: ``{"rows": [...], "noise":
    ...}``, the ranked rows and the ranking's noise (``platform.results.ranking``; None until assessed)."""
    rows = sorted(rows, key=_rank_key)
    flat = [row.flat(tasks) for row in rows]
    columns = list(dict.fromkeys(key for record in flat for key in record))
    with (run_dir / LEADERBOARD_CSV).open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(flat)
    record = {"rows": [row.record() for row in rows], "noise": noise}
    (run_dir / LEADERBOARD_FILE).write_text(json.dumps(record, indent=2))
    return rows


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
