"""A recorded table of training runs: every configuration of a grid with its validation and test
objective after every evaluation round.

``NAME.csv`` has the columns ``config,round,step,val_objective,test_objective,hp.<name>...``, one row
per configuration and round, and, where the build kept them, ``val_se.<task>...`` (each objective
task's validation standard error at that checkpoint, which the replay does not read); ``NAME.json``
beside it holds ``steps``, ``eval_every``, ``rounds``, the ``space`` with each dimension's kind and
grid values, the ``asha`` settings, the untouched base encoder's objectives where the build recorded
them (``baseline``), the scoring noise at the table's parts (``noise``) and how the table was made
(``made_by``, whose runs give the wall time per trained configuration). An empty objective cell is a
failed configuration (NaN here).
"""

from __future__ import annotations

import csv
import itertools
import json
import math
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from bench.child import NO_GPU
from platform.spec import Distribution

KINDS = ("uniform", "loguniform", "int", "choice")


@dataclass(frozen=True)
class Dimension:
    kind: str  # uniform, loguniform, int, choice
    values: tuple  # the table's grid values along it, in the JSON's order

    def distribution(self) -> Distribution:
        """The dimension as a search spec declares it: the grid's range, or its choices."""
        if self.kind == "choice":
            return Distribution("choice", self.values)
        low, high = min(self.values), max(self.values)
        return Distribution(self.kind, (int(low), int(high)) if self.kind == "int" else (float(low), float(high)))

    def index(self, value: Any) -> int:
        """The grid value nearest ``value`` (in log space for ``loguniform``); a choice must match."""
        if self.kind == "choice":
            return self.values.index(value)
        scale = np.log if self.kind == "loguniform" else np.asarray
        return int(np.argmin(np.abs(scale(np.asarray(self.values, dtype=float)) - scale(float(value)))))

    def cell_index(self, cell: str) -> int | None:
        """The grid value a CSV cell holds, or None when it is not on the grid."""
        for i, value in enumerate(self.values):
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                try:
                    if math.isclose(float(cell), value, rel_tol=1e-9, abs_tol=1e-12):
                        return i
                except ValueError:
                    continue
            elif str(value) == cell:
                return i
        return None


@dataclass(frozen=True)
class Asha:
    grace_period: int
    reduction_factor: float


@dataclass(frozen=True)
class Table:
    """A recorded table: ``val[c, r]`` and ``test[c, r]`` of configuration ``c`` after round ``r + 1``
    (NaN where it failed); ``grid[c]`` its index along every dimension of ``space``."""

    name: str
    steps: int
    eval_every: int
    rounds: int
    space: dict[str, Dimension]
    asha: Asha
    configs: tuple[str, ...]  # the ``config`` column, in first-appearance order
    grid: tuple[tuple[int, ...], ...]
    val: np.ndarray
    test: np.ndarray
    made_by: dict
    baseline_val: float | None  # the untouched base encoder's validation objective; None: not recorded
    objective_se: float | None  # the validation objective's scoring noise at the table's parts; None: not recorded
    seconds_per_configuration: float | None  # wall time of the build's runs per configuration they trained

    def startup_steps(self, startup_seconds: float) -> float | None:
        """A trial's start-up in training-step equivalents: the build's wall time per configuration
        is one start-up plus ``steps`` steps (each with its share of scoring), so a step-equivalent
        is the rest divided by ``steps``. None when the table records no wall time."""
        if self.seconds_per_configuration is None:
            return None
        if self.seconds_per_configuration <= startup_seconds:
            raise ValueError(
                f"{self.name}: a start-up of {startup_seconds} s is not less than the "
                f"{self.seconds_per_configuration:.1f} s a configuration took"
            )
        return startup_seconds * self.steps / (self.seconds_per_configuration - startup_seconds)

    def config_at(self, point: tuple[int, ...]) -> int:
        """The configuration at a point of the grid (its index along every dimension)."""
        return self._lookup[point]

    @cached_property
    def _lookup(self) -> dict[tuple[int, ...], int]:
        return {point: c for c, point in enumerate(self.grid)}


def _float(cell: str) -> float:
    return float(cell) if cell.strip() else math.nan


def _space(meta: dict, where: str) -> dict[str, Dimension]:
    space = {}
    for name, declared in meta["space"].items():
        ((kind, values),) = declared.items()
        if kind not in KINDS:
            raise ValueError(f"{where}: dimension {name!r} has kind {kind!r}, not one of {KINDS}")
        space[name] = Dimension(kind, tuple(values))
    return space


def _point(row: dict[str, str], space: dict[str, Dimension], where: str) -> tuple[int, ...]:
    point = []
    for name, dim in space.items():
        cell = row.get(f"hp.{name}")
        index = None if cell is None else dim.cell_index(cell)
        if index is None:
            raise ValueError(f"{where}: hp.{name}={cell} is not on the grid {dim.values}")
        point.append(index)
    return tuple(point)


def _check_grid(points: dict[str, tuple[int, ...]], space: dict[str, Dimension], where: str, partial: bool) -> None:
    """ValueError unless ``points`` (configuration -> grid point) covers the whole grid (with ``partial``,
    any part of it), each point once."""
    seen: dict[tuple[int, ...], str] = {}
    for config, point in points.items():
        if point in seen:
            raise ValueError(f"{where}: configurations {seen[point]} and {config} are the same point of the grid")
        seen[point] = config
    if partial:
        return
    names = list(space)
    missing = [
        ", ".join(f"{names[d]}={space[names[d]].values[i]}" for d, i in enumerate(point))
        for point in itertools.product(*(range(len(dim.values)) for dim in space.values()))
        if point not in seen
    ]
    if missing:
        listed = "; ".join(missing[:10]) + ("; ..." if len(missing) > 10 else "")
        raise ValueError(f"{where}: {len(missing)} configuration(s) of the grid are missing: {listed}")


def load_table(csv_path: str | Path, partial: bool = False) -> Table:
    """Read ``NAME.csv`` and the ``NAME.json`` beside it; ValueError unless the table holds every
    round of every point of the grid the JSON's ``space`` spans (with ``partial``, of the points it
    has: a table still being built, read for its diagnostics, never replayed), each once."""
    csv_path = Path(csv_path)
    where = csv_path.name
    meta = json.loads(csv_path.with_suffix(".json").read_text())
    rounds, eval_every = int(meta["rounds"]), int(meta["eval_every"])
    if int(meta["steps"]) != rounds * eval_every:
        raise ValueError(f"{where}: steps {meta['steps']} != rounds {rounds} x eval_every {eval_every}")
    space = _space(meta, where)
    results: dict[str, dict[int, tuple[float, float]]] = {}
    points: dict[str, tuple[int, ...]] = {}
    with csv_path.open(newline="") as handle:
        for line, row in enumerate(csv.DictReader(handle), start=2):
            config, round_ = row["config"], int(row["round"])
            if not 1 <= round_ <= rounds or int(float(row["step"])) != round_ * eval_every:
                raise ValueError(f"{where}:{line}: round {round_} at step {row['step']} is off the schedule")
            point = _point(row, space, f"{where}:{line}")
            if points.setdefault(config, point) != point:
                raise ValueError(f"{where}:{line}: configuration {config} changes its hyperparameters")
            if round_ in results.setdefault(config, {}):
                raise ValueError(f"{where}:{line}: configuration {config} has round {round_} twice")
            results[config][round_] = (_float(row["val_objective"]), _float(row["test_objective"]))
    short = [f"{config} (has rounds {sorted(r)})" for config, r in results.items() if len(r) != rounds]
    if short:
        raise ValueError(f"{where}: configurations missing rounds: {', '.join(short)}")
    _check_grid(points, space, where, partial)
    configs = tuple(results)
    return Table(
        name=meta["name"],
        steps=int(meta["steps"]),
        eval_every=eval_every,
        rounds=rounds,
        space=space,
        asha=Asha(int(meta["asha"]["grace_period"]), float(meta["asha"]["reduction_factor"])),
        configs=configs,
        grid=tuple(points[config] for config in configs),
        val=np.array([[results[c][r][0] for r in range(1, rounds + 1)] for c in configs]),
        test=np.array([[results[c][r][1] for r in range(1, rounds + 1)] for c in configs]),
        made_by=meta.get("made_by", {}),
        baseline_val=meta["baseline"]["val_objective"] if "baseline" in meta else None,
        objective_se=meta["noise"]["objective_se"] if "noise" in meta else None,
        seconds_per_configuration=_seconds_per_configuration(meta.get("made_by", {}).get("runs", [])),
    )


def _seconds_per_configuration(runs: list[dict]) -> float | None:
    """Total wall time over total configurations of the runs that timed what they trained on a
    machine without a GPU, less the one-time preparation a run on a new machine did first
    (``base_stage_seconds``: training the base). The start-up it is set against
    (``bench.efficiency.compare.STARTUP_SECONDS``) was measured on a machine without a GPU (2 CPUs):
    a GPU run's faster configurations would make it more steps than it is."""
    timed = [run for run in runs if run.get("wall_seconds") and run.get("configurations")]
    timed = [run for run in timed if run.get("machine", NO_GPU).endswith(NO_GPU)]
    if not timed:
        return None
    spent = sum(run["wall_seconds"] - run.get("base_stage_seconds", 0) for run in timed)
    return spent / sum(run["configurations"] for run in timed)
