"""One configuration's gain as the mean of its training runs' paired gains (``seed_mean_gain``)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from doctune_core.noise.gain import Gain
from doctune_core.noise.rules import LEVEL, NO_WIDTH
from doctune_core.noise.variance import BinaryPart, combined_variance, score_interval, t_interval, t_quantile


def seed_mean_gain(gains: Sequence[Gain], level: float = LEVEL) -> Gain:
    """One configuration's gain as the mean of its k training runs' paired gains (``paired_gain``,
    each without a seed term), every run scored on the same items against the same row.

    Its variance adds two terms: the seeds', the runs' sample variance of the gains over k with k - 1
    degrees of freedom (the items are shared, so the runs differ only by their training); and the
    items', the mean of the runs' item variances with the smallest of their degrees of freedom: an
    upper bound on the mean's own, since runs that share their items share at most all of their item
    noise. Each run's item variance is taken as ``paired_gain`` takes it (its ``components``): a
    binary part's at every candidate gain, Tango's, the interval every gain g with |mean - g| <= t *
    se(g) (``score_interval``), each run's binary parts moving with the mean; so a run whose rows
    never or seldom disagreed keeps the width its questions have earned, where its variance at the
    observed gain is 0. The interval is **never narrower than the seeds' own t interval** (their
    spread over sqrt(k), t at k - 1): Satterthwaite's degrees of freedom for a term estimated from 2
    or 3 runs are too many whenever its sample variance comes out small, and at the largest recorded
    seed spread the interval then covered 84.8-88.1% (2 runs) and 90.5-93.2% (3 runs) of the true
    gain (bench/seed_mean_calibration.py; docs/decisions/gain-intervals.md). No interval where any
    run's part was too few items to decide; none of no width (the runs' items agreed and the runs
    with them: ``agreement`` says so). A run recorded without its components (before 2026-12-07)
    counts its printed interval's half-width over t as its item standard error."""
    if len(gains) < 2:
        raise ValueError(f"a seeds' mean needs at least 2 runs, got {len(gains)}")
    differences = [g.difference for g in gains]
    difference = float(np.mean(differences))
    counted = {"runs": len(gains), "items": gains[0].items}
    counted["disagreed"] = max(g.disagreed for g in gains) if all(g.disagreed is not None for g in gains) else None
    undecided = [g for g in gains if g.undecided is not None]
    if undecided:
        return Gain(difference, None, None, level=level, seed_noise=True, undecided=undecided[0].undecided, **counted)
    seeds = (float(np.var(differences, ddof=1)) / len(gains), len(gains) - 1)

    def components_at(gain: float) -> list[tuple[float, float]]:
        runs = [_run_items(run, gain - difference) for run in gains]
        return [(float(np.mean([v for v, _ in runs])), min(dof for _, dof in runs)), seeds]

    se, dof = combined_variance(components_at(difference))
    if any((run.components or {}).get("binary") for run in gains):
        low, high = score_interval(difference, components_at, level)
    else:
        low, high, se, dof = t_interval(difference, components_at(difference), level)
    half = t_quantile(level, len(gains) - 1) * math.sqrt(seeds[0])  # the seeds' own t interval
    low, high = min(low, difference - half), max(high, difference + half)
    if high - low <= NO_WIDTH:
        agreement = f"{gains[0].agreement}, in each of the {len(gains)} runs"
        return Gain(difference, None, None, se, dof, level, seed_noise=True, agreement=agreement, **counted)
    return Gain(difference, low, high, se, dof, level, seed_noise=True, **counted)


def _run_items(run: Gain, shift: float) -> tuple[float, float]:
    """One run's item variance and its degrees of freedom, its binary parts' gains moved by ``shift``
    (``seed_mean_gain``); from its printed interval where it was recorded without its components."""
    if run.components is None:
        if run.low is None or run.high is None:
            return 0.0, math.inf
        half = max(run.difference - run.low, run.high - run.difference)
        return (half / t_quantile(run.level, run.degrees_of_freedom)) ** 2, run.degrees_of_freedom
    fixed = [(float(v), float(d)) for v, d in run.components["fixed"]]
    parts = [BinaryPart(*part) for part in run.components["binary"]]
    se, dof = combined_variance(fixed + [part.component(part.gain + shift) for part in parts])
    return se**2, dof
