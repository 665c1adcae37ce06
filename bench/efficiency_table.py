"""The search-efficiency table, built from real doctune searches and kept in the repository.

The table (``bench/data/<spec name>.csv`` and ``.json``, the format ``bench/search_efficiency.py
replay`` reads) holds, for every configuration of a spec's grid (``sampler: grid``, no early
stopping), its validation objective (the spec's objective weights over each task's ``val`` main
scores) after every evaluation round, and the test objective where a round scored the test part
(rounds built before the locked test parts did; a search's rounds now read validation only, so a
configuration trained now has none). Only configurations with every
round scored have rows, so a partly built table is refused by the replay until it is complete.

``build`` makes progress from wherever the table stands, on any machine:

- nothing yet: runs ``python -m platform.search SPEC`` (the grid search) in the run directory;
- a table with configurations missing: runs a search of exactly those (a copy of the spec with
  ``sampler: random``, the missing configurations as its ``warm_start`` points and as many
  samples, written beside the run directory);
- a run directory left by an interrupted build: resumes it (``--resume``), unless its search would
  train again a configuration the table has since taken from elsewhere; then, as after a finished
  run, a new run directory (``NAME-2``, ``NAME-3``, ...) searches what is missing. A build works in
  the newest of ``NAME``, ``NAME-2``, ... there is.

A run made on another machine (a lent GPU machine's, say: the spec's ``full`` profile) is merged
with ``--no-train --run-dir DIR`` (its scored checkpoints' JSON files suffice); its ``made_by``
entry names where it was trained (``trained_on``, from the run's ``search.json``). The table keeps
the untouched base's objectives it was first given: another machine scores the base within its
own numerics of this one.

Each call merges every scored checkpoint of its run directory into the table, while its search
runs (each configuration as it completes, every ``MERGE_EVERY_S``) and when it ends, and appends how
it was made to ``made_by``: command, versions, machine, date, wall time, the configurations the call
itself trained (``configurations``, the ones its wall time paid for) and those it merged without
training them (``merged``: left complete by an interrupted or finished earlier run). An entry written
while the search still ran says ``"ended": false`` and has no wall time (the base stage's share of it
is known only at the end): a call killed then keeps that entry, and its configurations, untimed. The
untouched base encoder's objectives, scored by every search (its ``baseline.json``), are kept as
``baseline``. A run is killed at any point without losing a configuration merged so far: the next
call resumes it, or, on a new machine, trains only what the table lacks.

Each row also keeps the validation standard error of every objective task at that checkpoint
(``val_se.<task>``, the task's ``main_se``: its items' and, for a few-shot probe, its draws' noise),
and the table's ``noise`` is measured on all of it: each task's standard error at every
configuration's last round, the median over the table's configurations.
"""

from __future__ import annotations

import contextlib
import csv
import itertools
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import yaml

if TYPE_CHECKING:
    from trainers.config import BaseSettings

ROOT = Path(__file__).resolve().parent.parent
MERGE_EVERY_S = 60  # how often a running build merges what its search has completed into the table

Cells = dict[tuple[int, ...], dict[int, tuple[float, float | None]]]  # grid point -> round -> (val, test)
Errors = dict[tuple[int, ...], dict[int, dict[str, float]]]  # grid point -> round -> task -> validation main_se


class Layout:
    """A grid spec's table: its dimensions' grid values, rounds and objective weights."""

    def __init__(self, spec) -> None:
        from platform.spec.grid import grid_space

        search = spec.search
        if search.sampler != "grid" or search.scheduler.asha is not None:
            raise SystemExit(f"{spec.name}: a table needs a grid search without early stopping (asha: null)")
        self.grid = grid_space(search.space, search.grid_points)
        self.kinds = {name: dist.kind for name, dist in search.space.items()}
        self.names = list(self.grid)
        self.eval_every = spec.train.eval_every
        self.rounds = -(-spec.train.steps // spec.train.eval_every)
        self.weights = next(iter(search.objective.named().values()))

    def points(self) -> list[tuple[int, ...]]:
        """Every grid point, in the table's configuration order."""
        return list(itertools.product(*(range(len(self.grid[n])) for n in self.names)))

    def point_of(self, hyperparameters: dict) -> tuple[int, ...]:
        """The grid point of a trial's values (the nearest grid value along each dimension)."""
        point = []
        for name in self.names:
            values, value = self.grid[name], hyperparameters[name]
            if isinstance(value, str) or isinstance(values[0], str):
                point.append(values.index(value))
            else:
                point.append(min(range(len(values)), key=lambda i: abs(values[i] - value)))
        return tuple(point)

    def values_at(self, point: tuple[int, ...]) -> dict:
        return {name: self.grid[name][i] for name, i in zip(self.names, point)}

    def objective(self, scores: dict, split: str) -> float | None:
        """The objective on one part; None where a task was not scored on it (a search's rounds score
        validation only)."""
        if not all(split in scores[t] for t in self.weights):
            return None
        return sum(w * scores[t][split]["main"] for t, w in self.weights.items()) / sum(self.weights.values())

    def objective_se(self, task_errors: dict[str, float]) -> float:
        """The objective's standard error from its tasks': the objective is the weighted mean of tasks
        scored on independent items, so its variance is the sum of the tasks' variances times their
        squared shares of the weight."""
        total = sum(self.weights.values())
        return sum((weight / total * task_errors[task]) ** 2 for task, weight in self.weights.items()) ** 0.5


def _scored_checkpoints(layout: Layout, run_dir: Path) -> Iterator[tuple[tuple[int, ...], int, dict]]:
    """(grid point, round, scores) of every scored checkpoint of a search's run directory."""
    for record_file in sorted(run_dir.glob("trials/*/checkpoints/step_*/doctune.json")):
        scores_file = record_file.with_name("scores.json")
        if scores_file.exists():
            record, scores = json.loads(record_file.read_text()), json.loads(scores_file.read_text())
            yield layout.point_of(record["hyperparameters"]), -(-record["step"] // layout.eval_every), scores


def cells_of_run(layout: Layout, run_dir: Path) -> Cells:
    """Every scored checkpoint of a search's run directory, by grid point and round."""
    cells: Cells = {}
    for point, round_, scores in _scored_checkpoints(layout, run_dir):
        cells.setdefault(point, {})[round_] = (layout.objective(scores, "val"), layout.objective(scores, "test"))
    return cells


def errors_of_run(layout: Layout, run_dir: Path) -> Errors:
    """Each objective task's validation standard error at every scored checkpoint that has one."""
    errors: Errors = {}
    for point, round_, scores in _scored_checkpoints(layout, run_dir):
        parts = [scores.get(task, {}).get("val", {}) for task in layout.weights]
        if all("main_se" in part for part in parts):
            errors.setdefault(point, {})[round_] = {t: p["main_se"] for t, p in zip(layout.weights, parts)}
    return errors


def items_of_run(run_dir: Path) -> dict[str, int]:
    """The items each task's validation part scored, from one of the run's scored checkpoints."""
    for scores_file in run_dir.glob("trials/*/checkpoints/step_*/scores.json"):
        scores = json.loads(scores_file.read_text())
        return {task: int(parts["val"]["n"]) for task, parts in scores.items() if "n" in parts.get("val", {})}
    return {}


def _rows(csv_path: Path) -> Iterator[dict[str, str]]:
    if csv_path.exists():
        with csv_path.open(newline="") as handle:
            yield from csv.DictReader(handle)


def cells_of_table(layout: Layout, csv_path: Path) -> Cells:
    """The scored cells of an existing table."""
    cells: Cells = {}
    for row in _rows(csv_path):
        if row["val_objective"]:
            point = layout.point_of({n: _cell(row[f"hp.{n}"]) for n in layout.names})
            pair = (float(row["val_objective"]), float(row["test_objective"]) if row["test_objective"] else None)
            cells.setdefault(point, {})[int(row["round"])] = pair
    return cells


def errors_of_table(layout: Layout, csv_path: Path) -> Errors:
    """The validation standard errors an existing table keeps (none in a table built before it kept them)."""
    errors: Errors = {}
    for row in _rows(csv_path):
        values = [row.get(f"val_se.{task}") for task in layout.weights]
        if all(values):
            point = layout.point_of({n: _cell(row[f"hp.{n}"]) for n in layout.names})
            errors.setdefault(point, {})[int(row["round"])] = dict(zip(layout.weights, map(float, values)))
    return errors


def _cell(text: str):
    try:
        return float(text)
    except ValueError:
        return text


def complete(layout: Layout, cells: Cells) -> set[tuple[int, ...]]:
    """The grid points with every round scored."""
    return {point for point, rounds in cells.items() if len(rounds) == layout.rounds}


def _numbered(run_dir: Path, k: int) -> Path:
    return run_dir if k == 1 else run_dir.with_name(f"{run_dir.name}-{k}")


def _run_dirs(run_dir: Path) -> list[Path]:
    """``run_dir``, ``run_dir-2``, ``run_dir-3``, ... as far as they exist (the first always)."""
    found = [run_dir]
    while (following := _numbered(run_dir, len(found) + 1)).exists():
        found.append(following)
    return found


def newest_run_dir(run_dir: Path) -> Path:
    """The run directory a build last worked in: ``run_dir``, or the newest ``run_dir-k`` it went on
    in after a finished run or one it could not resume."""
    return _run_dirs(run_dir)[-1]


def would_retrain(layout: Layout, run_dir: Path, in_table: set[tuple[int, ...]]) -> bool:
    """Whether resuming the interrupted search in ``run_dir`` would train a configuration the table
    already holds that this run has not completed: one merged from another run (a lent machine's)
    since this run began. Its search trains its spec's ``warm_start`` points where it has them (a
    build's copy of the spec for the missing configurations), else the whole grid. True also where
    that spec is not on this machine (a run brought from another): it cannot be resumed here."""
    record = run_dir / "search.json"
    if not record.exists():
        return False
    from platform.spec import read_raw

    spec = Path(json.loads(record.read_text())["spec"])
    spec = spec if spec.is_absolute() else ROOT / spec
    if not spec.exists():  # a run brought from another machine: its search cannot be resumed here
        return True
    warm_start = (read_raw(spec).get("search") or {}).get("warm_start")
    searched = {layout.point_of(values) for values in warm_start} if warm_start else set(layout.points())
    return bool((searched - complete(layout, cells_of_run(layout, run_dir))) & in_table)


def accounted(
    layout: Layout, in_table: set[tuple[int, ...]], gathered: Cells, run_before: Cells, run_after: Cells
) -> tuple[set[tuple[int, ...]], set[tuple[int, ...]]]:
    """What one build call did, as (trained, merged): the configurations its search completed (complete
    in the run directory after it, not before), and those it adds to the table without having trained
    them (``gathered`` from a finished earlier run, or left complete in the run directory by an
    interrupted one)."""
    trained = complete(layout, run_after) - complete(layout, run_before)
    return trained, (complete(layout, gathered) | complete(layout, run_after)) - in_table - trained


def merge_run(
    layout: Layout, cells: Cells, errors: Errors, run_cells: Cells, run_errors: Errors
) -> tuple[Cells, Errors]:
    """``cells`` and ``errors`` with a run's merged in: a configuration the run completed is taken
    from it, one it only partly trained only where nothing complete is known (so a trial cut short
    never pushes a complete configuration out of the table)."""
    have = complete(layout, cells)
    taken = {point for point, rounds in run_cells.items() if point not in have or len(rounds) == layout.rounds}
    kept_errors = {point: rounds for point, rounds in errors.items() if point not in taken}
    return (
        {**cells, **{point: run_cells[point] for point in taken}},
        {**kept_errors, **{point: run_errors[point] for point in taken if point in run_errors}},
    )


def baseline_of_run(layout: Layout, run_dir: Path) -> dict[str, float] | None:
    """The untouched base encoder's validation and test objective, from a search's ``baseline.json``."""
    from evaluators.leaderboard import BASELINE_ID

    path = run_dir / "baseline.json"
    if not path.exists():
        return None
    scores = json.loads(path.read_text())[BASELINE_ID]["scores"]
    return {"val_objective": layout.objective(scores, "val"), "test_objective": layout.objective(scores, "test")}


def base_stage_seconds(run_dir: Path, since: float, settings: BaseSettings | None) -> int:
    """The time the search that ran in ``run_dir`` after ``since`` (a ``time.time()``) spent training
    its base: a one-time preparation on a new machine, not part of any configuration's cost.

    From the search's ``timings.json``; a search stopped early (Ctrl-C at a session's end) writes
    none, so then from the base's own record (``wall_seconds`` in the cached base's ``doctune.json``,
    ``settings`` being the spec's ``base:``) where that base was finished after ``since``. 0 where
    neither says the base was trained in this run.
    """
    path = run_dir / "timings.json"
    if path.exists() and path.stat().st_mtime >= since:
        return round(json.loads(path.read_text())["phases"].get("base stage", 0.0))
    record = run_dir / "search.json"
    if settings is None or not record.exists():
        return 0
    from trainers.base_stage import base_entry

    base = base_entry(settings, json.loads(record.read_text())["prepared_corpus"]) / "doctune.json"
    if not base.exists() or base.stat().st_mtime < since:
        return 0
    return round(json.loads(base.read_text())["wall_seconds"])


def noise_of_run(layout: Layout, run_dir: Path) -> dict | None:
    """The scoring noise at the table's parts, from a finished search's ranking check
    (``leaderboard.json``'s ``noise``: each objective task's validation standard error, the median
    over the run's trials) and the objective's standard error it gives. None before the run has
    finished. For a table built before its rows kept their standard errors (``noise_of_table``)."""
    path = run_dir / "leaderboard.json"
    if not path.exists():
        return None
    tasks = (json.loads(path.read_text()).get("noise") or {}).get("tasks") or {}
    if set(tasks) != set(layout.weights):
        return None
    return {
        "part": "val",
        "tasks": {task: {key: tasks[task][key] for key in ("main_se", "n") if key in tasks[task]} for task in tasks},
        "objective_se": layout.objective_se({task: tasks[task]["main_se"] for task in layout.weights}),
        "measured_on": "the trials of the build run that recorded it (the median over them, per task)",
    }


def noise_of_table(layout: Layout, cells: Cells, errors: Errors, items: dict[str, int]) -> dict | None:
    """The scoring noise at the table's parts, measured on every configuration it holds: each
    objective task's validation standard error at the configuration's last round, the median over
    the configurations, and the objective's standard error those give. None unless every
    configuration's last round kept its standard errors."""
    last = [errors.get(point, {}).get(layout.rounds) for point in sorted(complete(layout, cells))]
    if not last or None in last:
        return None
    medians = {task: statistics.median(errs[task] for errs in last) for task in layout.weights}
    return {
        "part": "val",
        "tasks": {
            task: {"main_se": se, **({"n": items[task]} if task in items else {})} for task, se in medians.items()
        },
        "objective_se": layout.objective_se(medians),
        "measured_on": f"the table's {len(last)} configurations at their last round (the median over them, per task)",
    }


def write_table(
    layout: Layout,
    cells: Cells,
    csv_path: Path,
    made_by: list[dict],
    baseline: dict[str, float] | None,
    noise: dict | None,
    errors: Errors | None = None,
) -> Path:
    """The table's CSV and JSON, each written whole or not at all: configurations with every round
    scored only, so one whose run was cut short counts as missing and the next build trains it again;
    ``errors`` (the rows' validation standard errors) where known."""
    cells = {point: cells[point] for point in complete(layout, cells)}
    errors = errors or {}
    csv_path.parent.mkdir(parents=True, exist_ok=True)
    with _written_whole(csv_path) as handle:
        writer = csv.writer(handle)
        writer.writerow(
            [
                "config",
                "round",
                "step",
                "val_objective",
                "test_objective",
                *(f"hp.{n}" for n in layout.names),
                *(f"val_se.{task}" for task in layout.weights),
            ]
        )
        for config, point in enumerate(layout.points()):
            if point not in cells:
                continue
            for round_ in range(1, layout.rounds + 1):
                val, test = cells[point][round_]
                known = errors.get(point, {}).get(round_, {})
                writer.writerow(
                    [
                        config,
                        round_,
                        round_ * layout.eval_every,
                        val,
                        test,
                        *layout.values_at(point).values(),
                        *(known.get(task, "") for task in layout.weights),
                    ]
                )
    meta = {
        "name": csv_path.stem,
        "steps": layout.rounds * layout.eval_every,
        "eval_every": layout.eval_every,
        "rounds": layout.rounds,
        "space": {name: {layout.kinds[name]: values} for name, values in layout.grid.items()},
        "asha": {"grace_period": 1, "reduction_factor": 2},  # AshaSpec's defaults, the ones a search replays
        "objective": layout.weights,
        "configurations_trained": len(cells),
        "configurations": len(layout.points()),
        **({"baseline": baseline} if baseline is not None else {}),
        **({"noise": noise} if noise is not None else {}),
        # which test part the test objectives are of: a table built now holds the baseline's score on the
        # locked part, which tests/bench/test_locked_parts.py refuses (tables built before the lock say "retired")
        "test_part": "locked",
        "made_by": {"runs": made_by},
    }
    with _written_whole(csv_path.with_suffix(".json")) as handle:
        handle.write(json.dumps(meta, indent=2) + "\n")
    return csv_path


@contextlib.contextmanager
def _written_whole(path: Path) -> Iterator[TextIO]:
    """A file written beside ``path`` and renamed over it once complete: a build killed while
    writing leaves the table as it was."""
    partial = path.with_name(f".{path.name}.partial")
    with partial.open("w", newline="") as handle:
        yield handle
    os.replace(partial, path)


def fill_spec(raw: dict, missing: list[dict]) -> dict:
    """The spec, searching exactly the ``missing`` configurations: each a warm-start point of a
    random-sampler search of as many samples (in the spec's own search and in every profile's)."""
    filled = json.loads(json.dumps(raw))
    for holder in [filled, *filled.get("profiles", {}).values()]:
        if "search" in holder:
            holder["search"] = {
                **holder["search"],
                "sampler": "random",
                "samples": len(missing),
                "warm_start": missing,
            }
    return filled


def _machine() -> str:
    lines = Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").exists() else []
    cpu = next((line.split(":", 1)[1].strip() for line in lines if "model name" in line), "unknown CPU")
    from bench.child import gpus

    return f"{os.cpu_count()} CPUs ({cpu}), {gpus()}"


def trained_on(run_dir: Path) -> dict | None:
    """Where the search in ``run_dir`` ran, from its ``search.json`` (machine and versions, as
    ``made_by`` writes them): a ``--no-train`` merge names the machine that trained what it merges,
    which may not be the one merging it (a run brought back from a lent GPU machine)."""
    path = run_dir / "search.json"
    if not path.exists():
        return None
    environment = json.loads(path.read_text())["environment"]
    cpu, gpu = environment["cpu"], environment.get("gpu") or {}
    gpus = f"{gpu['count']} GPU ({', '.join(gpu['models'])})" if gpu.get("count") else "no GPU"
    packages = environment["packages"]
    return {
        "machine": f"{cpu['count']} CPUs ({cpu['model']}), {gpus}",
        "versions": {"python": environment["python"], **{name: packages[name] for name in sorted(packages)}},
        "code": environment.get("git_commit"),
    }


def _versions() -> dict[str, str]:
    from importlib.metadata import version

    return {"python": sys.version.split()[0], **{p: version(p) for p in ("torch", "ray", "optuna", "transformers")}}


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def build(spec_path: Path, run_dir: Path, csv_path: Path, profile: str, train: bool = True) -> Path:
    """One step of progress on the table (see the module docstring); returns the CSV's path. With
    ``train`` false, only what ``run_dir`` holds already is merged into the table."""
    from platform.spec import load_spec, read_raw

    spec, spec_path = load_spec(str(spec_path), profile)
    layout, asked_run_dir = Layout(spec), run_dir
    cells, errors = cells_of_table(layout, csv_path), errors_of_table(layout, csv_path)
    in_table = set(cells)
    meta = json.loads(csv_path.with_suffix(".json").read_text()) if cells else {}
    previous, baseline, noise = meta.get("made_by", {}).get("runs", []), meta.get("baseline"), meta.get("noise")
    items = {task: int(n) for task, parts in (noise or {}).get("tasks", {}).items() if (n := parts.get("n"))}
    if train:
        run_dir = newest_run_dir(run_dir)
    finished = (run_dir / "leaderboard.json").exists()
    if finished:  # its ranking check measured the noise at the table's parts
        noise, items = noise_of_run(layout, run_dir) or noise, items_of_run(run_dir) or items
    if train and (finished or would_retrain(layout, run_dir, in_table)):
        # a finished earlier run, or one whose resumed search would train again what the table has
        # from elsewhere (a run merged from another machine): its results in, the rest in a new one
        cells, errors = merge_run(layout, cells, errors, cells_of_run(layout, run_dir), errors_of_run(layout, run_dir))
        baseline = baseline or baseline_of_run(layout, run_dir)
        run_dir = _numbered(asked_run_dir, len(_run_dirs(asked_run_dir)) + 1)
    searched, resume = spec_path, (run_dir / "search.json").exists()
    done = complete(layout, cells)
    missing = [layout.values_at(p) for p in layout.points() if p not in done]
    if resume:
        searched = Path(json.loads((run_dir / "search.json").read_text())["spec"])
    elif train and not missing:
        print(f"{csv_path}: every configuration is trained")
        return write_table(
            layout, cells, csv_path, previous, baseline, noise_of_table(layout, cells, errors, items) or noise, errors
        )
    elif train and done:
        searched = run_dir.with_name(f"{run_dir.name}.fill.yaml")
        searched.parent.mkdir(parents=True, exist_ok=True)
        searched.write_text(yaml.safe_dump(fill_spec(read_raw(spec_path), missing), sort_keys=False))
        print(f"{csv_path}: {len(done)} configurations trained; training the {len(missing)} missing ({searched})")
    run_before = cells_of_run(layout, run_dir) if run_dir.exists() else {}
    began, started = time.monotonic(), time.time()
    invocation = f"python bench/search_efficiency.py build --spec {_shown(spec_path)} --profile {profile}"
    if asked_run_dir.resolve() != (ROOT / "bench" / "out" / Path(spec_path).stem).resolve():
        invocation += f" --run-dir {_shown(asked_run_dir)}"

    def record(ended: bool) -> Path:
        """The table with what ``run_dir`` holds merged in, and this call's entry in ``made_by``."""
        new = cells_of_run(layout, run_dir) if run_dir.exists() else {}
        new_errors = errors_of_run(layout, run_dir) if run_dir.exists() else {}
        trained, merged = accounted(layout, in_table, cells, run_before, new)
        run = {
            "command": invocation + ("" if train else " --no-train"),
            "configurations": len(trained),
            "merged": len(merged),
            "versions": _versions(),
            "machine": _machine(),
            "date": datetime.now(UTC).strftime("%Y-%m-%d"),
            "wall_seconds": round(time.monotonic() - began) if train and ended else None,
            **({"base_stage_seconds": base_stage_seconds(run_dir, started, spec.base)} if train and ended else {}),
            **({} if ended else {"ended": False}),
            **({} if train or (origin := trained_on(run_dir)) is None else {"trained_on": origin}),
        }
        # the table keeps the baseline it was first given: a run merged from another machine scores
        # the untouched base there, within that machine's numerics of this one
        found = baseline or (baseline_of_run(layout, run_dir) if run_dir.exists() else None)
        all_cells, all_errors = merge_run(layout, cells, errors, new, new_errors)
        in_run = items_of_run(run_dir) if run_dir.exists() else {}
        measured = noise_of_table(layout, all_cells, all_errors, in_run or items)
        measured = measured or (noise_of_run(layout, run_dir) if run_dir.exists() else None) or noise
        return write_table(layout, all_cells, csv_path, [*previous, run], found, measured, all_errors)

    if train:
        command = [sys.executable, "-m", "platform.search", str(searched), "--profile", profile, "--validation-only"]
        command += ["--run-dir", str(run_dir), *(["--resume"] if resume else [])]
        search = subprocess.Popen(command, cwd=ROOT, env={**os.environ, "HF_HUB_OFFLINE": "1"})
        code = follow(search, layout, run_dir, lambda: record(ended=False))
        if code != 0:
            print(f"the search ended with exit code {code}; keeping what it finished", file=sys.stderr)
    return record(ended=True)


def follow(
    search: subprocess.Popen, layout: Layout, run_dir: Path, record: Callable[[], object], every: float = MERGE_EVERY_S
) -> int:
    """Wait for ``search`` to end, calling ``record`` each time a configuration completes in
    ``run_dir`` (looked at every ``every`` seconds), so that a build killed later keeps it; the
    search's exit code. On Ctrl-C (which the search gets too, and stops on) it waits for the search."""
    completed = complete(layout, cells_of_run(layout, run_dir)) if run_dir.exists() else set()
    try:
        while True:
            try:
                return search.wait(timeout=every)
            except subprocess.TimeoutExpired:
                pass
            now = complete(layout, cells_of_run(layout, run_dir)) if run_dir.exists() else set()
            if now != completed:
                record()
                completed = now
    except KeyboardInterrupt:
        return search.wait()
