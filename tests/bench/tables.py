"""Search-efficiency tables written by hand for the tests, in the format ``bench.efficiency.table``
reads, and the checked-in tables whose replay is stored (``REPLAYED``)."""

from __future__ import annotations

import csv
import itertools
import json
from collections.abc import Callable
from pathlib import Path

from tests.conftest import ROOT

# every checked-in table whose replay is in bench/results/ (a table is replayed once it is whole)
REPLAYED = sorted(
    table
    for table in (ROOT / "bench" / "data").glob("efficiency_*.csv")
    if (ROOT / "bench" / "results" / f"{table.stem}.json").is_file()
)


def write_table(
    directory: Path,
    name: str,
    space: dict[str, dict[str, list]],
    rounds: int,
    eval_every: int,
    objectives: Callable[[dict, int], tuple[float | None, float | None]],
    skip: Callable[[dict], bool] = lambda point: False,
    asha: tuple[int, int] = (1, 2),
    recorded: dict | None = None,
) -> Path:
    """NAME.csv/NAME.json over the full grid of ``space`` (less the points ``skip`` names), with
    ``objectives(point, round) -> (val, test)`` (None: an empty cell); ``recorded`` goes into the JSON
    as well (``made_by``, ``baseline``)."""
    names = list(space)
    values = [next(iter(space[n].values())) for n in names]
    path = directory / f"{name}.csv"
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["config", "round", "step", "val_objective", "test_objective", *(f"hp.{n}" for n in names)])
        for c, combination in enumerate(itertools.product(*values)):
            point = dict(zip(names, combination, strict=True))
            if skip(point):
                continue
            for r in range(1, rounds + 1):
                val, test = objectives(point, r)
                cells = ["" if v is None else repr(v) for v in (val, test)]
                writer.writerow([f"c{c}", r, r * eval_every, *cells, *combination])
    meta = {
        "name": name,
        "steps": rounds * eval_every,
        "eval_every": eval_every,
        "rounds": rounds,
        "space": space,
        "asha": {"grace_period": asha[0], "reduction_factor": asha[1]},
        "made_by": {"command": "tests/bench/tables.py"},
        **(recorded or {}),
    }
    path.with_suffix(".json").write_text(json.dumps(meta))
    return path


# Three configurations, two rounds of 5 steps. The best test objective (0.99, z's round 2) is never
# the pick: z's best validation objective is its round 1 (test 0.2), and y's round 2 holds the best
# validation objective overall (test 0.3).
HAND = {
    "x": [(0.5, 0.9), (0.6, 0.1)],
    "y": [(0.4, 0.95), (0.9, 0.3)],
    "z": [(0.7, 0.2), (0.65, 0.99)],
}
