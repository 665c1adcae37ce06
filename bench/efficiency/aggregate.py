"""Traces read on a common budget grid and summarised over seeds.

Every trace is read as a step function on a common budget grid (every multiple of ``eval_every`` up to
the largest total consumed; undefined before the trace's first event, held after its last). Per method
and budget, the median and quartiles over seeds of the best validation objective and of the pick's test
objective; at each method's own end, the same plus the median steps consumed; and the compute each
method needs for its median to reach random search's final median, as a ratio of random search's budget.
"""

from __future__ import annotations

import math

import numpy as np

from bench.efficiency.replay import Trace
from bench.efficiency.table import Table

QUANTILES = (25, 50, 75)


def at_budgets(trace: Trace, budgets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """best_val and test_of_pick of a trace at each budget: its last event with ``consumed <= budget``
    (NaN before its first event)."""
    consumed = np.array([event.consumed for event in trace])
    index = np.searchsorted(consumed, budgets, side="right") - 1
    best = np.array([event.best_val for event in trace] + [math.nan])
    test = np.array([event.test_of_pick for event in trace] + [math.nan])
    return best[index], test[index]  # index -1 (before the first event) reads the NaN appended


def quartiles(samples: np.ndarray) -> np.ndarray:
    """25th, 50th and 75th percentiles over axis 0 (linear interpolation). -inf (no successful round
    yet) ranks below everything and an interpolation touching it is -inf; NaN (undefined) propagates."""
    finite = samples[np.isfinite(samples)]
    lowest = float(finite.min()) if finite.size else 0.0
    floor = lowest - max(1.0, abs(lowest))
    result = np.percentile(np.where(np.isneginf(samples), floor, samples), QUANTILES, axis=0)
    return np.where(result < lowest, -math.inf, result)


def _summary(values: np.ndarray) -> dict[str, float]:
    p25, median, p75 = quartiles(values)
    return {"median": float(median), "p25": float(p25), "p75": float(p75)}


def aggregate(table: Table, traces: dict[str, list[Trace]], samples: dict[str, int]) -> dict:
    """Per method (its traces, one per seed): the quartile curves over the common budget grid, the
    quartiles at its own end, and the budget its median needs to reach random search's final median."""
    largest = max(trace[-1].consumed for runs in traces.values() for trace in runs)
    budgets = np.arange(table.eval_every, largest + 1, table.eval_every)
    methods: dict[str, dict] = {}
    for name, runs in traces.items():
        best, test = zip(*(at_budgets(trace, budgets) for trace in runs), strict=True)
        best_q, test_q = quartiles(np.array(best)), quartiles(np.array(test))
        methods[name] = {
            "samples": samples[name],
            "seeds": len(runs),
            "curve": {
                "best_val": {key: q.tolist() for key, q in zip(("p25", "median", "p75"), best_q, strict=True)},
                "test_of_pick": {key: q.tolist() for key, q in zip(("p25", "median", "p75"), test_q, strict=True)},
            },
            "final_steps": _summary(np.array([float(trace[-1].consumed) for trace in runs])),
            "final_best_val": _summary(np.array([trace[-1].best_val for trace in runs])),
            "final_test_of_pick": _summary(np.array([trace[-1].test_of_pick for trace in runs])),
        }
    target = None
    if "random" in methods:
        random_budget = samples["random"] * table.steps
        target = {
            "budget": random_budget,
            "best_val": methods["random"]["curve"]["best_val"]["median"][int(random_budget // table.eval_every) - 1],
        }
    for entry in methods.values():
        reached = None
        if target is not None:
            medians = np.array(entry["curve"]["best_val"]["median"])
            hits = np.flatnonzero(medians >= target["best_val"])
            reached = int(budgets[hits[0]]) if hits.size else None
        entry["steps_to_target"] = reached
        entry["ratio_vs_random"] = None if reached is None else reached / target["budget"]
    return {
        "table": table.name,
        "configs": len(table.configs),
        "steps": table.steps,
        "eval_every": table.eval_every,
        "rounds": table.rounds,
        "asha": {"grace_period": table.asha.grace_period, "reduction_factor": table.asha.reduction_factor},
        "made_by": table.made_by,
        "budgets": budgets.tolist(),
        "random_target": target,
        "methods": methods,
    }
