"""The comparison repeated over independent batches of seeds, and how far its figures move.

Per batch of seeds (``bench.efficiency.batches``) and method:

- ``steps_to_target``: the training steps after which the method's median best validation objective
  over the batch's seeds first reaches random search's final median in the same batch (inf: never);
- ``compute_to_target``: the same, with every trial's start-up charged in training-step equivalents
  (``Table.startup_steps``), so the extra trials ASHA starts are paid for;
- ``test_vs_random``: the median over the batch's seeds of the test objective of the method's pick
  minus random search's pick on the same seed index, both at random search's full compute (start-up
  charged): every method gets the same budget.

Across batches, the 10th, 50th and 90th percentiles of each (order statistics, so "never" ranks last),
and of the ratios to random search's budget (the performance bar's measure) and to random search's own
figure in the same batch. A ratio whose interval spans 1 is inside the noise of the seeds.
"""

from __future__ import annotations

import math

import numpy as np

from bench.efficiency.aggregate import at_budgets, costs, quartiles
from bench.efficiency.replay import Replay, Trace

PERCENTILES = (10, 50, 90)


def steps_to_target(traces: list[Trace], target: float, startup: float = 0.0) -> float:
    """The compute (``aggregate.costs``) at which the median over ``traces`` of the best validation
    objective first reaches ``target``; inf if it never does."""
    grid = np.unique(np.concatenate([costs(trace, startup) for trace in traces]))
    best = np.array([at_budgets(trace, grid, startup)[0] for trace in traces])
    hits = np.flatnonzero(quartiles(best)[1] >= target)
    return float(grid[hits[0]]) if hits.size else math.inf


def spread(values: list[float]) -> dict[str, float]:
    """The 10th, 50th and 90th percentiles (the inverted empirical distribution: an order statistic)."""
    low, mid, high = np.percentile(np.array(values, dtype=float), PERCENTILES, method="inverted_cdf")
    return {"p10": float(low), "p50": float(mid), "p90": float(high)}


def per_batch(replays: dict[str, list[Replay]], startup: float) -> dict[str, dict[str, float]]:
    """One batch's figures (the module docstring) for every method; ``replays`` must hold ``random``."""
    random = [run.events for run in replays["random"]]
    target = float(quartiles(np.array([[trace[-1].best_val] for trace in random]))[1, 0])
    budget = np.array([costs(random[0], startup)[-1]])  # random search's compute, summed as every trace sums it
    random_tests = np.array([at_budgets(trace, budget, startup)[1][0] for trace in random])
    figures = {}
    for name, runs in replays.items():
        traces = [run.events for run in runs]
        tests = np.array([at_budgets(trace, budget, startup)[1][0] for trace in traces])
        figures[name] = {
            "steps_to_target": steps_to_target(traces, target),
            "compute_to_target": steps_to_target(traces, target, startup),
            "test_vs_random": float(np.median(tests - random_tests)),
        }
    return figures


def intervals(
    batches: list[dict[str, list[Replay]]], samples: dict[str, int], steps: int, startup: float
) -> dict[str, dict]:
    """Every method's figures in each batch and their spread across batches, with the ratios to random
    search's budget and to random search's own figure in the same batch."""
    figures = [per_batch(batch, startup) for batch in batches]
    budgets = {"steps_to_target": samples["random"] * steps, "compute_to_target": samples["random"] * (steps + startup)}
    result = {}
    for name in samples:
        entry: dict[str, dict] = {"per_batch": {}}
        for figure in ("steps_to_target", "compute_to_target", "test_vs_random"):
            values = [batch[name][figure] for batch in figures]
            entry["per_batch"][figure] = values
            entry[figure] = spread(values)
        for figure, budget in budgets.items():
            values = entry["per_batch"][figure]
            entry[figure]["never"] = sum(math.isinf(v) for v in values)
            entry[f"{figure}_vs_random_budget"] = spread([v / budget for v in values])
            entry[f"{figure}_vs_random"] = spread(
                [v / batch["random"][figure] for v, batch in zip(values, figures, strict=True)]
            )
        result[name] = entry
    return result
