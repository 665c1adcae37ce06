"""Traces read on a common budget grid and summarised over seeds.

Every trace is read as a step function of the compute spent (undefined before the trace's first event,
held after its last): the training steps consumed, or those plus a start-up charged to every trial
started. Per method, on a common grid of training steps (every multiple of ``eval_every`` up to the
largest total consumed), the median and quartiles over seeds of the best validation objective and of
the pick's test objective; at each method's own end, the same plus the median steps consumed; and
random search's final median best validation objective, the target ``bench.efficiency.intervals``
measures every method's way to.
"""

from __future__ import annotations

import math

import numpy as np

from bench.efficiency.replay import Trace
from bench.efficiency.table import Table

QUANTILES = (25, 50, 75)


def costs(trace: Trace, startup: float = 0.0) -> np.ndarray:
    """The compute spent by each event of a trace: its training steps plus ``startup`` step-equivalents
    for every trial started."""
    return np.array([event.consumed + startup * event.trials for event in trace])


def at_budgets(trace: Trace, budgets: np.ndarray, startup: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """best_val and test_of_pick of a trace at each budget: its last event whose compute (``costs``)
    is within the budget (NaN before its first event)."""
    index = np.searchsorted(costs(trace, startup), budgets, side="right") - 1
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
    """Per method (its traces, one per seed): the quartile curves over the common budget grid and the
    quartiles at its own end; random search's final median best validation objective."""
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
