"""Is a gain beyond noise, and do a search's trials differ beyond noise?

Two questions, both answered from the items every encoder was scored on:

- ``paired_gain``: the difference between two encoders and its interval (below);
- ``spread_test``: whether the spread of several encoders' objectives (a search's trials) is more
  than scoring noise alone would give them (``Spread``), from ``joint_resamples``.

**A gain.**
Two encoders scored on the same part of the same tasks (``Task.outcomes``: one row per query,
document or pair) differ by the (weighted) difference of their main scores. Its interval is a
paired t interval whose variance adds, per task, the items' and (a few-shot probe's) the draws'
share, and the training seeds' where they were measured (``search.confirm_seeds``), with
Welch-Satterthwaite degrees of freedom (Satterthwaite, *Biometrics Bulletin* 2(6), 1946):

- items, a continuous mean over items (nDCG@10 per query): the paired differences' variance over n,
  with pseudo-items (below); a score that is not a mean over items (a probe's macro-F1 over its
  draws), the same of the rows' paired influence values (the delta method, ``Outcomes.influence``),
  else by the paired bootstrap widened by n / (n - 1); n - 1 degrees of freedom;
- items, a binary part (acc@1 per question, ``Outcomes.binary``): the variance of a difference of
  paired proportions were the gain the one being tested, Tango's (``paired_proportions_variance``),
  and the interval every gain g with |difference - g| <= t * se(g) (``score_interval``: a test
  inverted, as Wilson's interval for one proportion). At the observed gain it is the plain
  variance; where the rows never or seldom disagreed, a gain of g would have disagreed on about
  |g| of the items, and the interval keeps the gains such a part cannot rule out. In a gain over
  several parts each binary part's gain moves with the whole one's, by the same amount;
- pseudo-items, for a gain on one continuous part (a task, a length bucket): ``PSEUDO_ITEMS`` items
  on each side at plus and minus the root mean square of the differences that are not 0 (1 where
  none is): Bonett & Price's adjusted variance of paired proportions (*The American Statistician*
  66(2), 2012: one pseudo-item in each discordant cell) on the part's own scale, for a part near its
  ceiling whose differences are as sparse as a binary part's. A gain over several parts takes none:
  its other parts give it width;
- draws: the sample variance of the per-draw differences (the same draws for both) over m, less
  the part of it each draw's own item noise makes (already in the items' term); its degrees of
  freedom Satterthwaite's for a difference of mean squares, (m - 1) (net / gross)^2, the whole
  between-draw variance's uncertainty carried by what is left of it: with 3 draws the net term is
  often small and its m - 1 alone made the interval too narrow (R8 at the local profile's sizes
  covered 90-93%, bench/RESULTS.md); where the net term comes out at or below 0 it keeps that
  uncertainty, so the interval does not jump narrower there;
- seeds: the trained row's score is one training run's; the seeds' variance, estimated from k runs,
  with k - 1 degrees of freedom (2 runs give 1: a wide interval, as it should be), and the interval
  never narrower than the seeds' own t interval (t at k - 1 times their spread): Satterthwaite's
  degrees of freedom for a term estimated from 2 or 3 runs are too many whenever its sample variance
  comes out small (bench/seed_mean_calibration.py). Without measured seeds the gain says "seed
  noise not included": it is this run's gain, not the configuration's.

A part too small to decide (``too_few_to_decide``: a rule fixed before the interval was
calibrated) prints no interval but "too few items to decide". The interval's coverage of a known
gain at the sizes the profiles ship, item outcomes resampled from recorded runs and the seeds'
spread estimated from 2 or 3 runs, beside the percentile bootstrap, BCa, the Bayesian bootstrap
and an exact McNemar interval, is ``bench/gain_calibration.py`` (bench/RESULTS.md,
docs/decisions/gain-intervals.md).

**A spread.** The trials of one search are scored on the same validation items, so their scores
share the items' noise; what separates them is each trial's own part of it. ``joint_resamples``
draws the items (and, separately, a few-shot probe's draws) with replacement, the same draw for
every trial, and recomputes every trial's objective. Centred on the observed values, each resample is what
the trials would look like if they did not differ at all: the spread of ``resampled - observed``
across trials is a draw of the spread that scoring noise alone produces (the bootstrap's null
distribution, Efron & Tibshirani, *An Introduction to the Bootstrap*, 1993, ch. 16). The observed
spread is beyond noise when fewer than 5% of those null spreads reach it. Where the training
seeds' spread was measured (``search.confirm_seeds``) it is added to the null as independent
noise per trial, since a trial's configuration is scored through one training run.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import asdict, astuple, dataclass, fields

import numpy as np

from evaluators.tasks.base import Outcomes, mean_of_rows

BOOTSTRAP_ROUNDS = 1000
LEVEL = 0.95

# "Too few items to decide": the rule and its history (docs/decisions/gain-intervals.md).
# - 2026-12-02 (75892a4), before the first calibration ran: a binary part under 30 items (one item
#   flipped moves its score by more than 0.03, and the normal approximation to paired proportions is
#   not to be trusted below about 30); a continuous part under 10 items (it estimates its own variance
#   too poorly); a few-shot probe under 2 draws.
# - 2026-12-03 (94c16b4), after the first calibration had run: a probe needs 3 draws. Two give the
#   draws' term one degree of freedom at most; at 2 draws the interval covered R8 86-94% while its
#   median width was 0.26-0.72 (bench/probe_draws.py), neither holding nor telling anything. Raised with
#   those rows in view, so this part of the rule was not fixed beforehand.
# - 2026-12-07: unchanged, kept with margin (``DECIDED_MARGIN``).
MIN_ITEMS = {"binary": 30, "continuous": 10}
MIN_DRAWS = 3
# pseudo-items on each side of a continuous part's differences when its gain is printed alone (Bonett &
# Price 2012's one in each discordant cell, on the part's own scale), so a part where the rows seldom
# disagreed still gets the width its n has earned; a gain over several parts takes none: its other parts
# give it width, and pseudo-items on each small part made it far too wide (bench/RESULTS.md)
PSEUDO_ITEMS = 1.0
# a gain over several tasks is decided when the tasks the rule lets through carry at least this
# share of its weight (the rest still add their noise to its interval)
DECIDED_WEIGHT = 0.5
# what the shipped profiles keep above that boundary, for the objective and the long-document tasks
# pooled at the local and full sizes (tests/evaluators/test_noise.py): a gain decided on the boundary
# itself (the local long tasks pooled, the passage task's 1.0 of 2.0 until 2026-12-07) would go
# undecided as soon as one weight moved, and the rule would hide it
DECIDED_MARGIN = 0.1
# the draws' term where its net variance comes out at or below 0: this share of the gross one, small
# enough to add nothing to the variance, large enough that its degrees of freedom stay a float
_VANISHING = 1e-9
# a verdict on a part where this few items or fewer disagreed says how many: its interval may cover more
# than 97% (the rows cannot rule out a gain those items would show; docs/decisions/gain-intervals.md)
FEW_DISAGREED = 2
# an interval narrower than this has no width (a millionth of a score's range; its variance's rounding
# error alone reaches a billionth): its items said nothing of noise (``items_agreement``)
NO_WIDTH = 1e-6


@dataclass(frozen=True)
class SeedSpread:
    """The training seeds' standard deviation of a score, estimated from ``runs`` training runs of
    one configuration (``search.confirm_seeds``): ``runs - 1`` degrees of freedom."""

    sd: float
    runs: int


@dataclass(frozen=True)
class Gain:
    """``difference`` = score(a) - score(b), with its interval (``paired_gain``); ``low`` and ``high``
    are None, and ``undecided`` says why, where the parts are too small to decide."""

    difference: float
    low: float | None
    high: float | None
    # at the observed difference; a binary part's interval takes each candidate gain's (score_interval)
    standard_error: float | None = None
    degrees_of_freedom: float | None = None
    level: float = LEVEL
    # whether the interval holds the training seeds' noise (measured by search.confirm_seeds); a
    # trained row's score is one training run's, so without it the interval is too narrow
    seed_noise: bool = False
    undecided: str | None = None
    # how many training runs' gains ``difference`` is the mean of (``seed_mean_gain``)
    runs: int = 1
    # where the items leave an interval no width (none disagreed, or every one moved alike): what they
    # did, said instead of an interval of no width (``agreement``); ``low`` and ``high`` are then None
    agreement: str | None = None
    # how many of the ``items`` the two rows scored apart (``disagreeing_items``; the binary parts' alone
    # where the gain has some, as their score interval gives it its width; a seeds' mean: the most in any
    # run); a verdict on at most ``FEW_DISAGREED`` of them says so (docs/decisions/gain-intervals.md)
    disagreed: int | None = None
    items: int | None = None
    # the variance components its interval was made of, for a seeds' mean to combine (``seed_mean_gain``):
    # ``fixed``, [variance, degrees of freedom] each; ``binary``, each binary part's [share, up, down, n, gain]
    components: dict | None = None

    @property
    def beyond_noise(self) -> bool:
        return self.low is not None and self.high is not None and (self.low > 0 or self.high < 0)

    def describe(self) -> str:
        seeds = "" if self.seed_noise else "; seed noise not included"
        seeds += f"; the mean of {self.runs} training runs" if self.runs > 1 else ""
        if self.agreement is not None:
            return f"{self.difference:+.4f} ({self.agreement}: no interval{seeds})"
        if self.low is None or self.high is None:
            return f"{self.difference:+.4f} (too few items to decide: {self.undecided}{seeds})"
        verdict = "beyond noise" if self.beyond_noise else "within noise"
        if self.disagreed is not None and self.disagreed <= FEW_DISAGREED:
            verdict += f", {self.disagreed} of {self.items} items disagreed"
        return (
            f"{self.difference:+.4f} ({self.level:.0%} interval {self.low:+.4f} to {self.high:+.4f}: {verdict}{seeds})"
        )

    def cell(self) -> str:
        """The gain and its interval in a table cell (``s``: seed noise included)."""
        seeds = " s" if self.seed_noise else ""
        if self.agreement is not None:
            return f"{self.difference:+.3f} ({self.agreement}{seeds})"
        if self.low is None or self.high is None:
            return f"{self.difference:+.3f} (too few items to decide{seeds})"
        return f"{self.difference:+.3f} ({self.low:+.3f} to {self.high:+.3f}{seeds})"

    def record(self) -> dict:
        return asdict(self) | {"beyond_noise": self.beyond_noise}

    @classmethod
    def from_record(cls, record: dict) -> Gain:
        return cls(**{f.name: record[f.name] for f in fields(cls) if f.name in record})


def check_paired(task: str, a: Outcomes, b: Outcomes) -> None:
    """Refuse to pair two rows' outcomes on ``task`` unless they scored the same items, in the same
    order: by id where both know their items' ids, else by count."""
    if len(a.items) != len(b.items) or (a.ids and b.ids and a.ids != b.ids):
        raise ValueError(f"{task}: the two rows were scored on different items; a paired comparison needs the same")


def too_few_to_decide(outcomes: Outcomes) -> str | None:
    """Why a part is too small for an interval (None: it is not): ``undecided_part`` of its outcomes."""
    return undecided_part(len(outcomes.items), outcomes.binary, outcomes.draw_count if outcomes.draw_width else None)


def undecided_part(items: int, binary: bool, draws: int | None = None) -> str | None:
    """Why a part of ``items`` items (``binary`` scores or continuous ones; ``draws``: a few-shot
    probe's draws, None for a part without) is too small for an interval (None: it is not): fewer
    items than ``MIN_ITEMS`` of its kind, or a probe with fewer than ``MIN_DRAWS`` draws."""
    kind = "binary" if binary else "continuous"
    if items < MIN_ITEMS[kind]:
        return f"{items} {kind} items, {MIN_ITEMS[kind]} needed"
    if draws is not None and draws < MIN_DRAWS:
        return f"{draws} few-shot draws, {MIN_DRAWS} needed"
    return None


def decided_share(weights: dict[str, float], undecided: Collection[str]) -> float:
    """The share of a gain's weight its decided tasks carry (those not in ``undecided``): the gain
    has an interval where this reaches ``DECIDED_WEIGHT``."""
    return sum(w for t, w in weights.items() if t not in undecided) / sum(weights.values())


def item_variance(
    a: Outcomes,
    b: Outcomes,
    rng: np.random.Generator,
    rounds: int = BOOTSTRAP_ROUNDS,
    pseudo_items: float = PSEUDO_ITEMS,
) -> float:
    """The variance, over items, of main(a) - main(b) on one part (draws held fixed): see the
    module's docstring. A mean over items gets ``pseudo_items`` items on each side, at plus and minus
    the root mean square of the differences that are not 0 (1, an item score's range, where none
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
    between = max(between, _VANISHING * gross)
    return between / m, (m - 1) * (between / gross) ** 2


def t_interval(
    difference: float, components: list[tuple[float, float]], level: float = LEVEL
) -> tuple[float, float, float, float]:
    """``difference`` ± t * se from independent variance ``components`` (variance, degrees of
    freedom): the low and high ends, se, and the Welch-Satterthwaite degrees of freedom."""
    se, dof = _combined(components)
    half = _t_quantile(level, dof) * se
    return difference - half, difference + half, se, dof


def _combined(components: list[tuple[float, float]]) -> tuple[float, float]:
    """The standard error of a sum of independent variance ``components`` and its Welch-Satterthwaite
    degrees of freedom (infinite where nothing is estimated)."""
    variance = sum(v for v, _ in components)
    if variance <= 0:
        return 0.0, math.inf
    denominator = sum(v**2 / dof for v, dof in components if v > 0)
    return math.sqrt(variance), variance**2 / denominator if denominator > 0 else math.inf


def _t_quantile(level: float, dof: float) -> float:
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
        se, dof = _combined(components_at(g))
        return abs(difference - g) > _t_quantile(level, dof) * se

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
class _BinaryPart:
    """A binary part of a gain: its squared weight share, its discordant counts and its gain."""

    share: float
    up: int
    down: int
    n: int
    gain: float

    def component(self, gain: float) -> tuple[float, float]:
        return self.share * paired_proportions_variance(self.up, self.down, self.n, gain) / self.n, max(self.n - 1, 1)


def paired_gain(
    a: dict[str, Outcomes],
    b: dict[str, Outcomes],
    weights: dict[str, float],
    seeds: SeedSpread | None = None,
    level: float = LEVEL,
    seed: int = 0,
    pseudo_items: float | None = None,
    binary_score: bool = True,
) -> Gain:
    """The weighted mean over ``weights``' tasks of main(a) - main(b), and its interval (the
    module's docstring); ``seeds``: the training seeds' spread of a's score where it was measured;
    ``pseudo_items``: a continuous mean's (``item_variance``): by default ``PSEUDO_ITEMS`` for a gain on
    one part, none for a gain over several, whose other parts give it width; ``binary_score``: binary
    parts' variance at each candidate gain (``score_interval``), else at the observed one with
    ``pseudo_items`` as a continuous part's (the calibration compares both). No interval where the
    tasks ``too_few_to_decide`` lets through carry less than ``DECIDED_WEIGHT`` of the weight."""
    for task in weights:
        check_paired(task, a[task], b[task])
        if a[task].draw_count != b[task].draw_count:
            raise ValueError(f"{task}: the two rows were scored on different draws")
    total = sum(weights.values())
    difference = float(sum(w * (a[t].value() - b[t].value()) for t, w in weights.items()) / total)
    rng = np.random.default_rng(seed)
    if pseudo_items is None:
        pseudo_items = PSEUDO_ITEMS if len(weights) == 1 else 0.0
    fixed, binary = [], []
    for task, weight in weights.items():
        share = (weight / total) ** 2
        if binary_score and a[task].binary and a[task].statistic is mean_of_rows:
            differences = np.asarray(a[task].items, float) - np.asarray(b[task].items, float)
            up, down = int(np.sum(differences > 0)), int(np.sum(differences < 0))
            binary.append(_BinaryPart(share, up, down, len(differences), float(np.mean(differences))))
            continue
        variance = item_variance(a[task], b[task], rng, pseudo_items=pseudo_items)
        fixed.append((share * variance, max(len(a[task].items) - 1, 1)))
        draws, draws_dof = draw_variance(a[task], b[task], variance)
        fixed.append((share * draws, draws_dof))
    if seeds is not None:
        fixed.append((seeds.sd**2, max(seeds.runs - 1, 1)))

    def components_at(gain: float) -> list[tuple[float, float]]:
        # each binary part's gain moves with the whole one's, by the same amount
        return fixed + [part.component(part.gain + gain - difference) for part in binary]

    se, dof = _combined(components_at(difference))
    if binary:
        low, high = score_interval(difference, components_at, level)
    else:
        low, high, se, dof = t_interval(difference, fixed, level)
    if seeds is not None:  # never narrower than the seeds' own t interval (``seed_mean_gain`` says why)
        half = _t_quantile(level, max(seeds.runs - 1, 1)) * seeds.sd
        low, high = min(low, difference - half), max(high, difference + half)
    reasons = {task: why for task in weights if (why := too_few_to_decide(a[task]))}
    if decided_share(weights, reasons) < DECIDED_WEIGHT:
        why = "; ".join(f"{t}: {why}" if len(weights) > 1 else why for t, why in reasons.items())
        return Gain(difference, None, None, se, dof, level, seeds is not None, undecided=why)
    pairs = {t: (a[t], b[t]) for t in weights}
    made_of = {"fixed": [list(c) for c in fixed], "binary": [list(astuple(part)) for part in binary]}
    # where the binary parts give the interval its width (their score interval), their items are the ones counted
    counted_pairs = {t: pair for t, pair in pairs.items() if pair[0].binary} or pairs
    counted = {
        "disagreed": sum(disagreeing_items(*p) for p in counted_pairs.values()),
        "items": len_items(counted_pairs),
        "components": made_of,
    }
    if high - low <= NO_WIDTH:  # the items left no noise to measure: say what they did instead
        return Gain(
            difference, None, None, se, dof, level, seeds is not None, agreement=items_agreement(pairs), **counted
        )
    return Gain(difference, low, high, se, dof, level, seed_noise=seeds is not None, **counted)


def len_items(pairs: dict[str, tuple[Outcomes, Outcomes]]) -> int:
    return sum(len(a.items) for a, _ in pairs.values())


def disagreeing_items(a: Outcomes, b: Outcomes) -> int:
    """How many items the two rows scored apart: a mean over items, those whose scores differ; a
    probe (or any score over rows), those whose rows differ in any column (a few-shot draw's prediction)."""
    items_a, items_b = np.asarray(a.items), np.asarray(b.items)
    if a.statistic is mean_of_rows:
        return int(np.sum(np.round(items_a.astype(float) - items_b.astype(float), 9) != 0))
    return int(np.sum(np.any((items_a != items_b).reshape(len(items_a), -1), axis=1)))


def items_agreement(pairs: dict[str, tuple[Outcomes, Outcomes]]) -> str:
    """What the items of a gain whose interval has no width did, in words: "no item of 60 disagreed"
    (no item, nor any few-shot draw, scored apart), else "every item of 60 moved by +0.020" (each a
    mean over items whose differences are all one value), else each task's."""
    moves = {}
    for task, (a, b) in pairs.items():
        if not disagreeing_items(a, b):
            moves[task] = (len(a.items), 0.0)
        elif a.statistic is mean_of_rows:
            differences = np.unique(np.round(np.asarray(a.items, float) - np.asarray(b.items, float), 9))
            moves[task] = (len(a.items), float(differences[0]) if len(differences) == 1 else None)
        else:
            moves[task] = (len(a.items), None)
    n = len_items(pairs)
    shifts = {shift for _, shift in moves.values()}
    if shifts == {0.0}:
        return f"no item of {n} disagreed"
    if len(shifts) == 1 and None not in shifts:
        return f"every item of {n} moved by {shifts.pop():+.3f}"
    return "items all moved alike within each task: " + "; ".join(
        f"{task}: {count} by {shift:+.3f}" if shift is not None else f"{task}: {count}, apart"
        for task, (count, shift) in moves.items()
    )


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

    se, dof = _combined(components_at(difference))
    if any((run.components or {}).get("binary") for run in gains):
        low, high = score_interval(difference, components_at, level)
    else:
        low, high, se, dof = t_interval(difference, components_at(difference), level)
    half = _t_quantile(level, len(gains) - 1) * math.sqrt(seeds[0])  # the seeds' own t interval
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
        return (half / _t_quantile(run.level, run.degrees_of_freedom)) ** 2, run.degrees_of_freedom
    fixed = [(float(v), float(d)) for v, d in run.components["fixed"]]
    parts = [_BinaryPart(*part) for part in run.components["binary"]]
    se, dof = _combined(fixed + [part.component(part.gain + shift) for part in parts])
    return se**2, dof


def task_gain(a: Outcomes, b: Outcomes, task: str, seeds: dict[str, SeedSpread] | None = None) -> dict:
    """Row a's gain over row b on one task's part, paired by item (``paired_gain``), with the same
    gain per stratum of a's (a retrieval task's length buckets, each with its ``n``): a ``Gain``
    record plus ``by_stratum``. ``seeds``: the training seeds' spread of a's score (``main``) and of
    each stratum's (its label), where they were measured."""
    seeds = seeds or {}
    record = paired_gain({task: a}, {task: b}, {task: 1.0}, seeds.get("main")).record()
    record["by_stratum"] = {
        label: paired_gain({task: a.subset(rows)}, {task: b.subset(rows)}, {task: 1.0}, seeds.get(label)).record()
        | {"n": len(rows)}
        for label, rows in a.strata.items()
        if len(rows) >= 2  # as Outcomes.stratum_scores: one item has no interval at all
    }
    return record


def joint_resamples(
    encoders: Sequence[dict[str, Outcomes]],
    weights: dict[str, float],
    rounds: int = BOOTSTRAP_ROUNDS,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """The weighted objective of each encoder, ``(n,)``, and under ``rounds`` joint resamples,
    ``(rounds, n)``. Each resample draws every task's items with replacement, the same draw for
    every encoder, and, for a task with several draws (few-shot probes), separately its draws; a
    task's deviation from its observed score is the sum of the two, each widened by
    sqrt(m / (m - 1)) for its m items or draws (the bootstrap's variance of a mean is (m - 1) / m
    of the sampling variance; with a few-shot probe's 3 to 5 draws that matters)."""
    for task in weights:
        for other in encoders[1:]:
            check_paired(task, encoders[0][task], other[task])
        if len({e[task].draw_count for e in encoders}) > 1:
            raise ValueError(f"{task}: the encoders were scored on different items or draws")
    total = sum(weights.values())
    observed_tasks = {t: np.array([e[t].value() for e in encoders]) for t in weights}
    observed = sum(w * observed_tasks[t] for t, w in weights.items()) / total
    rng = np.random.default_rng(seed)
    resampled = np.empty((rounds, len(encoders)))
    for r in range(rounds):
        deviation = np.zeros(len(encoders))
        for task, weight in weights.items():
            n, draws = len(encoders[0][task].items), encoders[0][task].draw_count
            rows = rng.integers(0, n, n)
            shift = np.array([e[task].value(rows) for e in encoders]) - observed_tasks[task]
            deviation += weight * shift * math.sqrt(n / (n - 1)) if n > 1 else 0.0
            if draws > 1:
                picked = rng.integers(0, draws, draws)
                shift = np.array([e[task].value(draws=picked) for e in encoders]) - observed_tasks[task]
                deviation += weight * shift * math.sqrt(draws / (draws - 1))
        resampled[r] = observed + deviation / total
    return observed, resampled


@dataclass(frozen=True)
class Spread:
    """How far apart several encoders' objectives are (``spread``: their sample standard deviation)
    against the spread scoring noise alone gives encoders that do not differ (``noise_spread``: the
    median of the null distribution); ``p_value``: the share of null spreads at least as large as
    the observed one. ``difference_se``: the median, over pairs, of the standard error of a paired
    difference; ``objective_se``: the median standard error of one encoder's objective; ``seed_sd``:
    the training seeds' standard deviation where it was measured (included in the null)."""

    encoders: int
    spread: float
    noise_spread: float
    p_value: float
    difference_se: float
    objective_se: float
    rounds: int
    seed_sd: float | None = None
    level: float = LEVEL

    @property
    def ratio(self) -> float:
        return self.spread / self.noise_spread if self.noise_spread > 0 else math.inf

    @property
    def beyond_noise(self) -> bool:
        return self.p_value < 1 - self.level

    @property
    def true_spread(self) -> float:
        """The spread left once noise is taken out (variances subtract), 0 when noise explains it all."""
        return math.sqrt(max(self.spread**2 - self.noise_spread**2, 0.0))

    def record(self) -> dict:
        return asdict(self) | {"ratio": self.ratio, "beyond_noise": self.beyond_noise, "true_spread": self.true_spread}

    @classmethod
    def from_record(cls, record: dict) -> Spread:
        return cls(**{f.name: record[f.name] for f in fields(cls)})


def spread_test(
    observed: np.ndarray, resampled: np.ndarray, seed_sd: float | None = None, seed: int = 0, level: float = LEVEL
) -> Spread:
    """Whether ``observed`` (one objective per encoder) spreads more than noise: see the module's
    docstring. ``resampled`` comes from ``joint_resamples``; needs at least two encoders."""
    if len(observed) < 2:
        raise ValueError("a spread needs at least two encoders")
    null = resampled - observed
    if seed_sd:
        null = null + np.random.default_rng(seed).normal(0.0, seed_sd, size=null.shape)
    null_spreads = np.std(null, axis=1, ddof=1)
    spread = float(np.std(observed, ddof=1))
    exceed = int(np.sum(null_spreads >= spread - 1e-12))
    pairs = [(i, j) for i in range(len(observed)) for j in range(i + 1, len(observed))]
    differences = [np.std(resampled[:, i] - resampled[:, j], ddof=1) for i, j in pairs]
    return Spread(
        encoders=len(observed),
        spread=spread,
        noise_spread=float(np.median(null_spreads)),
        p_value=(1 + exceed) / (1 + len(null_spreads)),
        difference_se=float(np.median(differences)),
        objective_se=float(np.median(np.std(resampled, axis=0, ddof=1))),
        rounds=len(null_spreads),
        seed_sd=seed_sd,
        level=level,
    )


POWER = 0.8  # the chance of calling a real spread beyond noise that a budget estimate aims for


def items_needed(spread: Spread, items: int, power: float = POWER) -> float | None:
    """How many scoring items (per task, scaled as the current ``items``) would call a true spread
    of ``spread.true_spread`` among ``spread.encoders`` encoders beyond noise with probability
    ``power``: scoring noise shrinks as 1/sqrt(items), and the spread test is close to a chi-square
    test with ``encoders - 1`` degrees of freedom whose noncentrality is
    ``(encoders - 1) * true_spread^2 / noise_sd^2``. None when the true spread is indistinguishable
    from 0 (no number of items separates encoders that do not differ) or the seeds' noise alone
    is too large (more items cannot remove it)."""
    from scipy import optimize, stats

    if spread.true_spread <= 0:
        return None
    dof = spread.encoders - 1
    critical = stats.chi2.ppf(spread.level, dof)

    def power_at(noise_sd: float) -> float:
        return float(stats.ncx2.sf(critical, dof, dof * spread.true_spread**2 / noise_sd**2))

    if power_at(1e-9 + (spread.seed_sd or 0.0)) < power:
        return None
    scoring_sd = math.sqrt(max(spread.noise_spread**2 - (spread.seed_sd or 0.0) ** 2, 1e-18))
    if power_at(spread.noise_spread) >= power:
        return float(items)
    # the scoring noise that reaches the power, found on (seed noise, current scoring noise]
    needed = optimize.brentq(
        lambda s: power_at(math.hypot(s, spread.seed_sd or 0.0)) - power, 1e-9, scoring_sd, xtol=1e-12
    )
    return float(items * (scoring_sd / needed) ** 2)


def items_to_tell(gain: Gain, power: float = POWER) -> float | None:
    """How many times today's items would call a true difference of ``gain.difference`` beyond
    noise with probability ``power``: the two-sided test at ``gain.level`` detects ``d`` when
    ``d / se >= z(1 - (1 - level) / 2) + z(power)``, and the difference's standard error ``se``
    (the gain's own; a record from before it was kept: read from the interval's width, ``2 z se``)
    shrinks as 1/sqrt(items). None for a difference of 0 or less (no number of items finds a gain
    that is not there), or without a standard error; at least 1."""
    from scipy import stats

    if gain.difference <= 0:
        return None
    z = stats.norm.ppf(0.5 + gain.level / 2)
    se = gain.standard_error
    if se is None and gain.low is not None and gain.high is not None:
        se = (gain.high - gain.low) / (2 * z)
    if se is None:
        return None
    return max(1.0, ((z + stats.norm.ppf(power)) * se / gain.difference) ** 2)
