"""Is a gain beyond noise, and do a search's trials differ beyond noise?

Two questions, both answered by resampling the items every encoder was scored on:

- ``paired_bootstrap``: the difference between two encoders and its interval (below);
- ``spread_test``: whether the spread of several encoders' objectives (a search's trials) is more
  than scoring noise alone would give them (``Spread``), from ``joint_resamples``.

**A gain.**
Two encoders scored on the same part of the same tasks (``Task.outcomes``: one row per query,
document or pair) are compared by resampling the items with replacement, the same resample for
both, and recomputing the difference of their (weighted) main scores each time (Efron &
Tibshirani, *An Introduction to the Bootstrap*, 1993, ch. 16; the paired form is the standard one
for comparing two systems on one test collection, e.g. Sakai, SIGIR 2006). The 95% percentile
interval of those differences says whether the gain is beyond noise: it is when the interval
excludes 0. Tasks are resampled independently; a few-shot probe's draws are resampled too, the
same draws for both encoders, and where the training seeds' spread was measured
(``search.confirm_seeds``) it is added, since the trained encoder's score is one training run's;
without it the gain says "seed noise not included". The interval's coverage of a known gain,
with item, draw and seed noise at the sizes the default search measures, is calibrated in
``bench/gain_calibration.py`` (bench/RESULTS.md).

**A spread.** The trials of one search are scored on the same validation items, so their scores
share the items' noise; what separates them is each trial's own part of it. ``joint_resamples``
draws the items (and, separately, a few-shot probe's draws) with replacement, the same draw for
every trial, and recomputes every trial's objective. Centred on the observed values, each resample is what
the trials would look like if they did not differ at all: the spread of ``resampled - observed``
across trials is a draw of the spread that scoring noise alone produces (the bootstrap's null
distribution, Efron & Tibshirani 1993, ch. 16). The observed spread is beyond noise when fewer
than 5% of those null spreads reach it. Where the training seeds' spread was measured
(``search.confirm_seeds``) it is added to the null as independent noise per trial, since a
trial's configuration is scored through one training run.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields

import numpy as np

from evaluators.tasks.base import Outcomes

BOOTSTRAP_ROUNDS = 1000
LEVEL = 0.95


@dataclass(frozen=True)
class Gain:
    """``difference`` = score(a) - score(b), with its paired-bootstrap interval."""

    difference: float
    low: float
    high: float
    rounds: int
    level: float = LEVEL
    # whether the interval holds the training seeds' noise (measured by search.confirm_seeds); a
    # trained row's score is one training run's, so without it the interval is too narrow
    seed_noise: bool = False

    @property
    def beyond_noise(self) -> bool:
        return self.low > 0 or self.high < 0

    def describe(self) -> str:
        verdict = "beyond noise" if self.beyond_noise else "within noise"
        seeds = "" if self.seed_noise else "; seed noise not included"
        return (
            f"{self.difference:+.4f} ({self.level:.0%} interval {self.low:+.4f} to {self.high:+.4f}: {verdict}{seeds})"
        )

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


def paired_bootstrap(
    a: dict[str, Outcomes],
    b: dict[str, Outcomes],
    weights: dict[str, float],
    rounds: int = BOOTSTRAP_ROUNDS,
    seed: int = 0,
    level: float = LEVEL,
    seed_sd: float | None = None,
) -> Gain:
    """The weighted mean over ``weights``' tasks of main(a) - main(b), and its interval.

    Each resample draws every task's items with replacement, the same rows for both rows, and, for a
    task with several draws (a few-shot probe's), separately its draws, the same for both; each
    deviation from the observed difference is widened by sqrt(m / (m - 1)) for its m items or draws
    and the two are added (as ``joint_resamples`` does). ``seed_sd``, where the training seeds' spread
    of the difference is known (``search.confirm_seeds``), adds a normal deviation of that size per
    resample: the trained row's score is one training run's. The interval's coverage is calibrated
    on simulated comparisons with all three sources (bench/gain_calibration.py)."""
    for task in weights:
        check_paired(task, a[task], b[task])
        if a[task].draw_count and b[task].draw_count and a[task].draw_count != b[task].draw_count:
            raise ValueError(f"{task}: the two rows were scored on different draws")
    total = sum(weights.values())
    observed_tasks = {t: a[t].value() - b[t].value() for t in weights}
    observed = sum(w * observed_tasks[t] for t, w in weights.items()) / total
    rng = np.random.default_rng(seed)
    resampled = np.empty(rounds)
    for r in range(rounds):
        deviation = 0.0
        for task, weight in weights.items():
            n, draws = len(a[task].items), a[task].draw_count
            if n > 1:
                rows = rng.integers(0, n, n)
                shift = a[task].value(rows) - b[task].value(rows) - observed_tasks[task]
                deviation += weight * shift * math.sqrt(n / (n - 1))
            if draws > 1:
                picked = rng.integers(0, draws, draws)
                shift = a[task].value(draws=picked) - b[task].value(draws=picked) - observed_tasks[task]
                deviation += weight * shift * math.sqrt(draws / (draws - 1))
        resampled[r] = observed + deviation / total + (rng.normal(0.0, seed_sd) if seed_sd else 0.0)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(resampled, [tail, 100 - tail])
    return Gain(float(observed), float(low), float(high), rounds, level, seed_noise=seed_sd is not None)


def task_gain(a: Outcomes, b: Outcomes, task: str, min_items: int = 2) -> dict:
    """Row a's gain over row b on one task's part, paired by item (``paired_bootstrap``), with the
    same gain per stratum of a's (a retrieval task's length buckets, each with its ``n``) where the
    stratum holds at least ``min_items`` items: a ``Gain`` record plus ``by_stratum``."""
    record = paired_bootstrap({task: a}, {task: b}, {task: 1.0}).record()
    record["by_stratum"] = {
        label: paired_bootstrap({task: a.subset(rows)}, {task: b.subset(rows)}, {task: 1.0}).record() | {"n": len(rows)}
        for label, rows in a.strata.items()
        if len(rows) >= min_items
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
    (read from the interval's width, ``2 z se``) shrinks as 1/sqrt(items). None for a difference
    of 0 or less (no number of items finds a gain that is not there); at least 1."""
    from scipy import stats

    if gain.difference <= 0:
        return None
    z = stats.norm.ppf(0.5 + gain.level / 2)
    se = (gain.high - gain.low) / (2 * z)
    return max(1.0, ((z + stats.norm.ppf(power)) * se / gain.difference) ** 2)
