"""The comparison: every method replayed over the same batches of seeds, summarised, with the spread of
its figures across batches, the table's diagnostics and a few seeds kept whole to check against."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from bench.efficiency.aggregate import aggregate
from bench.efficiency.batches import Batches, run_batches
from bench.efficiency.diagnostics import diagnostics
from bench.efficiency.intervals import intervals
from bench.efficiency.table import Table

# Start-up, checkpoints and reports of a trial of the local search on 2 CPUs: 44.7 s over its 4 trials
# (bench/RESULTS.md at cf730cc, "Search overhead", from the run's timings.json), so 11.2 s a trial.
STARTUP_SECONDS = 11.2
STORED_SEEDS = 3  # seeds 0..2 of every method, written out whole: tests replay them against the code


def startup(table: Table, seconds: float) -> dict:
    """The start-up charged to every trial, in seconds and in the table's training-step equivalents."""
    steps = table.startup_steps(seconds)
    return {
        "seconds_per_trial": seconds,
        "seconds_per_configuration": table.seconds_per_configuration,
        "steps_per_trial": 0.0 if steps is None else steps,
        "charged": steps is not None,
    }


def stored_seeds(batches: Batches, samples: dict[str, int]) -> dict[str, list[dict]]:
    """What each method ran on its first seeds and where it ended."""
    return {
        name: [
            {"seed": seed, "configs": run.configs, "rounds": run.rounds, "final": run.events[-1]._asdict()}
            for seed, run in enumerate(batches.replays[name][0][:STORED_SEEDS])
        ]
        for name in samples
    }


def compare(
    table: Table,
    samples: dict[str, int],
    batches: int,
    seeds: int,
    startup_seconds: float = STARTUP_SECONDS,
    cache: Path | None = None,
    progress: Callable[[str], None] = lambda line: None,
    jobs: int = 1,
) -> dict:
    """Every method of ``samples`` (name -> trials) over ``batches`` batches of ``seeds`` seeds: the
    curves and end points of the first batch (``aggregate``), each method's replay time per seed, the
    start-up charged, the figures' spread across batches (``intervals``; with random search among the
    methods), ``diagnostics`` and ``stored_seeds``. ``jobs``: processes replaying uncached batches."""
    runs = run_batches(table, samples, batches, seeds, cache, progress, jobs)
    result = aggregate(table, {name: [run.events for run in runs.replays[name][0]] for name in samples}, samples)
    for name, entry in result["methods"].items():
        entry["seconds_per_seed"] = runs.seconds[name] / (batches * seeds)
    result["startup"] = startup(table, startup_seconds)
    if "random" in samples:
        per_batch = [{name: runs.replays[name][b] for name in samples} for b in range(batches)]
        result["intervals"] = {
            "batches": batches,
            "seeds_per_batch": seeds,
            "methods": intervals(per_batch, samples, table.steps, result["startup"]["steps_per_trial"]),
        }
    result["diagnostics"] = diagnostics(table)
    result["stored_seeds"] = stored_seeds(runs, samples)
    return result
