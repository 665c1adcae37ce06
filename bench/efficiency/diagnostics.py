"""How much there is to find in a table, whatever the search.

A search steers by the validation objective and is judged by the test objective, so it can do no
better than random search where the validation ranking of configurations does not predict their test
ranking. That is measured as Spearman's rank correlation between validation and test objective across
configurations, with a 90% bootstrap interval over configurations (``BOOTSTRAP`` resamples, seeded),
taken two ways: at the last round, and at the round each configuration's best validation objective
would pick (the product's checkpoint choice). Each is given over every configuration with finite
objectives there, over the *sensible* ones (none diverged: every round finite; and, where the table
records the untouched base's validation objective, at or above it -- a configuration that makes the
encoder worse than no training says nothing about which good one is better) and over the sensible
ones at or above their median validation objective.

Where the table records its scoring noise (the build's ranking check: the validation objective's
standard error at the table's parts), that standard error is set against the configurations'
spread (the standard deviation of their last-round validation objectives), with a 90% bootstrap
interval over configurations: at most a third of it, and a search on these parts ranks
configurations by what they are rather than by their noise.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import rankdata

from bench.efficiency.table import Table

BOOTSTRAP = 2000
MIN_CONFIGURATIONS = 3  # Spearman's rho of two points is always +1 or -1


def rank_correlation(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman's rho between ``x`` and ``y`` along the last axis (ties take their average rank, as in
    ``scipy.stats.spearmanr``); NaN where either is constant."""
    rx, ry = rankdata(x, axis=-1), rankdata(y, axis=-1)
    rx -= rx.mean(axis=-1, keepdims=True)
    ry -= ry.mean(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (rx * ry).sum(axis=-1) / np.sqrt((rx**2).sum(axis=-1) * (ry**2).sum(axis=-1))


def spearman(val: np.ndarray, test: np.ndarray, seed: int = 0) -> dict[str, float | int | None]:
    """rho with its 90% bootstrap interval (5th and 95th percentiles over resampled configurations)."""
    n = len(val)
    if n < MIN_CONFIGURATIONS:
        return {"configurations": n, "rho": None, "p05": None, "p95": None}
    resample = np.random.default_rng(seed).integers(0, n, size=(BOOTSTRAP, n))
    rhos = rank_correlation(val[resample], test[resample])
    p05, p95 = np.nanpercentile(rhos, [5, 95])
    return {"configurations": n, "rho": float(rank_correlation(val, test)), "p05": float(p05), "p95": float(p95)}


def _at_best_round(table: Table) -> tuple[np.ndarray, np.ndarray]:
    """Each configuration's validation and test objective at its best validation round (ties: the
    earlier round; a failed round never best)."""
    rounds = np.argmax(np.where(np.isnan(table.val), -np.inf, table.val), axis=1)
    picked = np.arange(len(table.configs))
    return table.val[picked, rounds], table.test[picked, rounds]


def correlations(table: Table) -> dict[str, dict[str, dict]]:
    """Spearman's rho (with its interval) at the last round and at the best round, over every
    configuration with finite objectives there, the sensible ones and their top half by validation."""
    diverged = ~(np.isfinite(table.val) & np.isfinite(table.test)).all(axis=1)
    result = {}
    for selection, (val, test) in {
        "last_round": (table.val[:, -1], table.test[:, -1]),
        "best_round": _at_best_round(table),
    }.items():
        finite = np.isfinite(val) & np.isfinite(test)
        sensible = finite & ~diverged
        if table.baseline_val is not None:
            sensible &= val >= table.baseline_val
        top_half = sensible & (val >= np.median(val[sensible])) if sensible.any() else sensible
        result[selection] = {
            name: spearman(val[chosen], test[chosen])
            for name, chosen in (("all", finite), ("sensible", sensible), ("sensible_top_half", top_half))
        }
    return result


def _ratio_interval(objective_se: float | None, val: np.ndarray, seed: int = 0) -> list[float] | None:
    """The 90% bootstrap interval of ``objective_se`` over the spread of ``val`` (its standard
    deviation), resampling configurations: how far the ratio moves with the configurations the table
    happens to hold. None without a recorded standard error or with too few configurations."""
    if objective_se is None or len(val) < MIN_CONFIGURATIONS:
        return None
    resample = np.random.default_rng(seed).integers(0, len(val), size=(BOOTSTRAP, len(val)))
    with np.errstate(divide="ignore"):
        ratios = objective_se / val[resample].std(axis=1, ddof=1)
    p05, p95 = np.percentile(ratios, [5, 95])
    return [float(p05), float(p95)]


def diagnostics(table: Table) -> dict:
    """The spread of the last round's validation objective over configurations, the test objective of
    its best configuration against the best and median test objective any configuration has (the most
    a search could report), and ``correlations``."""
    val, test = table.val[:, -1], table.test[:, -1]
    ok = np.isfinite(val) & np.isfinite(test)
    val, test = val[ok], test[ok]
    return {
        "configurations": int(ok.sum()),
        "val_range": float(val.max() - val.min()),
        "val_std": float(val.std(ddof=1)),
        "test_of_best_val": float(test[np.argmax(val)]),
        "best_test": float(test.max()),
        "median_test": float(np.median(test)),
        "baseline_val": table.baseline_val,
        "objective_se": table.objective_se,
        "se_over_spread": None if table.objective_se is None else table.objective_se / float(val.std(ddof=1)),
        "se_over_spread_interval": _ratio_interval(table.objective_se, val),
        "sensible": (
            "finite objectives in every round, validation at or above the untouched base's"
            if table.baseline_val is not None
            else "finite objectives in every round (the table records no baseline validation objective)"
        ),
        "bootstrap": {"resamples": BOOTSTRAP, "interval": "p05-p95"},
        "spearman": correlations(table),
    }


def _values(table: Table, c: int) -> tuple:
    """Configuration ``c``'s hyperparameter values, by name (floats to 12 significant digits)."""
    return tuple(
        (name, float(f"{value:.12g}") if isinstance(value, float) else value)
        for name, value in ((n, table.space[n].values[i]) for n, i in zip(table.space, table.grid[c], strict=True))
    )


def _pearson(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Pearson's r between ``x`` and ``y`` along the last axis; NaN where either is constant."""
    x = x - x.mean(axis=-1, keepdims=True)
    y = y - y.mean(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (x * y).sum(axis=-1) / np.sqrt((x**2).sum(axis=-1) * (y**2).sum(axis=-1))


def agreement(table: Table, other: Table, seed: int = 0) -> dict:
    """The configurations both tables hold (the same hyperparameters, trained alike, scored on other
    parts, say), at the last round: for the validation and the test objective, over the
    configurations finite in both, Pearson's r and Spearman's rho between the two tables with their
    90% bootstrap intervals over configurations, and each table's spread over them (the standard
    deviation of the validation objective: ``table``'s, then ``other``'s); None where either table's
    objective is constant over them."""
    where = {_values(other, c): c for c in range(len(other.configs))}
    pairs = [(c, where[key]) for c in range(len(table.configs)) if (key := _values(table, c)) in where]
    mine, theirs = (np.array([pair[i] for pair in pairs], dtype=int) for i in (0, 1))
    result: dict = {"configurations": len(pairs)}
    rng = np.random.default_rng(seed)
    for part, (a, b) in {"val": (table.val, other.val), "test": (table.test, other.test)}.items():
        x, y = a[mine, -1], b[theirs, -1]
        finite = np.isfinite(x) & np.isfinite(y)  # a diverged configuration says nothing of agreement
        x, y = x[finite], y[finite]
        result[part] = {"configurations": len(x)}
        if len(x) < MIN_CONFIGURATIONS:
            continue
        resample = rng.integers(0, len(x), size=(BOOTSTRAP, len(x)))
        for name, measure in (("pearson", _pearson), ("spearman", rank_correlation)):
            r, resampled = float(measure(x, y)), measure(x[resample], y[resample])
            if np.isnan(r) or np.isnan(resampled).all():  # a constant objective in either table
                result[part][name] = {"r": None, "p05": None, "p95": None}
                continue
            p05, p95 = np.nanpercentile(resampled, [5, 95])
            result[part][name] = {"r": r, "p05": float(p05), "p95": float(p95)}
        if part == "val":
            result["val_std"] = [float(x.std(ddof=1)), float(y.std(ddof=1))]
    return result
