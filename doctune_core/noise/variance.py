"""The variance components of a paired gain (items, few-shot draws) and the intervals made of them:
the t interval with Welch-Satterthwaite degrees of freedom, and a binary part's score interval
(Tango's variance of paired proportions, inverted)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from doctune_core.noise.rules import BOOTSTRAP_ROUNDS, LEVEL, PSEUDO_ITEMS, VANISHING
from doctune_core.outcomes import Outcomes, mean_of_rows


def item_variance(
    a: Outcomes,
    b: Outcomes,
    rng: np.random.Generator,
    rounds: int = BOOTSTRAP_ROUNDS,
    pseudo_items: float = PSEUDO_ITEMS,
) -> float:
    """The variance, over items, of main(a) - main(b) on one part (draws held fixed): see the
    docstring of ``doctune_core.noise``. A mean over items gets ``pseudo_items`` items on each side,
    at plus and minus the root mean square of the differences that are not 0 (1, an item score's range, where none
    is): on a binary part (as ``paired_gain`` takes one with ``binary_score`` off), Bonett & Price's
    pseudo-item in each discordant cell."""
    n = len(a.items)
    if n < 2:
        return 0.0
    if a.statistic is mean_of_rows:
        differences = np.asarray(a.items, float) - np.asarray(b.items, float)
        differ = differences[differences != 0]
        pseudo_range = float(np.sqrt(np.mean(differ**2))) if len(differ) else 1.0
        size = n + 2 * pseudo_items
        mean = differences.sum() / size
        mean_square = (np.sum(differences**2) + 2 * pseudo_items * pseudo_range**2) / size
        return float((mean_square - mean**2) / size)
    if a.influence is not None and b.influence is not None:  # the delta method: no resampling
        return float(np.var(a.influence(a.items) - b.influence(b.items), ddof=1) / n)
    observed = a.value() - b.value()
    shifts = np.empty(rounds)
    for r in range(rounds):
        rows = rng.integers(0, n, n)
        shifts[r] = a.value(rows) - b.value(rows) - observed
    return float(np.mean(shifts**2) * n / (n - 1))


def draw_variance(a: Outcomes, b: Outcomes, items_of_mean: float) -> tuple[float, float]:
    """The variance, over a few-shot probe's draws, of main(a) - main(b) (0 without several draws),
    and its degrees of freedom. The per-draw differences also vary with each draw's own item noise,
    which ``items_of_mean`` (``item_variance`` of the mean over draws) holds already: where the rows'
    influence values tell it, it is taken out (a two-way random-effects split of items and draws), so
    it is not counted twice. What is left carries the uncertainty of the whole between-draw variance
    it was taken from (Satterthwaite 1946's rule for a linear combination of mean squares; the
    items' share, estimated over every item, is precise beside it). Where the difference comes out
    at or below 0 the term is clipped to a vanishing variance that keeps that uncertainty: its
    share of Satterthwaite's sum, (gross / m)^2 / (m - 1), does not depend on the net term, so the
    interval does not jump narrower when the net term crosses 0 (bench/probe_draws.py: R8 at the
    local sizes covered 92.3-97.3% with the term dropped there, 94.7-98.5% with it kept)."""
    if a.draws is None or b.draws is None or len(a.draws) < 2:
        return 0.0, 1.0
    m = len(a.draws)
    gross = float(np.var(np.asarray(a.draws) - np.asarray(b.draws), ddof=1))
    between = gross
    if a.influence is not None and b.influence is not None:
        # one draw's item variance, on average over the draws, against that of their mean
        one_draw = np.mean([item_variance(a.one_draw(d), b.one_draw(d), np.random.default_rng(0)) for d in range(m)])
        between -= max(one_draw - items_of_mean, 0.0) * m / (m - 1)
    if gross <= 0:
        return 0.0, m - 1.0
    between = max(between, VANISHING * gross)
    return between / m, (m - 1) * (between / gross) ** 2


def t_interval(
    difference: float, components: list[tuple[float, float]], level: float = LEVEL
) -> tuple[float, float, float, float]:
    """``difference`` ± t * se from independent variance ``components`` (variance, degrees of
    freedom): the low and high ends, se, and the Welch-Satterthwaite degrees of freedom."""
    se, dof = combined_variance(components)
    half = t_quantile(level, dof) * se
    return difference - half, difference + half, se, dof


def combined_variance(components: list[tuple[float, float]]) -> tuple[float, float]:
    """The standard error of a sum of independent variance ``components`` and its Welch-Satterthwaite
    degrees of freedom (infinite where nothing is estimated)."""
    variance = sum(v for v, _ in components)
    if variance <= 0:
        return 0.0, math.inf
    denominator = sum(v**2 / dof for v, dof in components if v > 0)
    return math.sqrt(variance), variance**2 / denominator if denominator > 0 else math.inf


def t_quantile(level: float, dof: float) -> float:
    from scipy import special

    return float(special.stdtrit(dof, 0.5 + level / 2)) if math.isfinite(dof) else float(special.ndtri(0.5 + level / 2))


def paired_proportions_variance(up: int, down: int, n: int, gain: float) -> float:
    """The variance of one item's difference on a binary part (each row 1 or 0; the difference +1, 0
    or -1) were its true gain ``gain``, given ``up`` items only row a got right and ``down`` only row b
    did, of ``n``: the discordant cells' probabilities are Tango's constrained maximum-likelihood
    estimates (*Statistics in Medicine* 17(8), 1998: p_up - p_down = gain), the variance
    p_up + p_down - gain^2. At the observed gain it is the plain one; where the rows never disagreed
    it is |gain| - gain^2, not 0: the width a gain of that size would have had."""
    gain = min(max(gain, -1.0), 1.0)
    if gain < 0:  # the same with the rows' roles swapped
        up, down, gain = down, up, -gain
    linear = (2 * n - up + down) * gain - (up + down)
    constant = -down * gain * (1 - gain)
    p_down = (-linear + math.sqrt(linear**2 - 8 * n * constant)) / (4 * n)
    return max(2 * p_down + gain - gain**2, 0.0)


def score_interval(difference: float, components_at, level: float = LEVEL) -> tuple[float, float]:
    """The gains g whose own standard error holds ``difference``: |difference - g| <= t * se(g), where
    ``components_at(g)`` are the variance components were the gain g (a test inverted, as Wilson's
    interval for a proportion; Tango's for paired proportions). Each end is found by doubling the
    distance from ``difference`` until it lies outside, then bisecting to 1e-6."""

    def outside(g: float) -> bool:
        se, dof = combined_variance(components_at(g))
        return abs(difference - g) > t_quantile(level, dof) * se

    ends = []
    for direction in (-1.0, 1.0):
        inner, outer = 0.0, 1e-4
        while not outside(difference + direction * outer):
            inner, outer = outer, 2 * outer
        while outer - inner > 1e-6:
            middle = (inner + outer) / 2
            inner, outer = (inner, middle) if outside(difference + direction * middle) else (middle, outer)
        ends.append(difference + direction * outer)
    return ends[0], ends[1]


@dataclass(frozen=True)
class BinaryPart:
    """A binary part of a gain: its squared weight share, its discordant counts and its gain."""

    share: float
    up: int
    down: int
    n: int
    gain: float

    def component(self, gain: float) -> tuple[float, float]:
        return self.share * paired_proportions_variance(self.up, self.down, self.n, gain) / self.n, max(self.n - 1, 1)
