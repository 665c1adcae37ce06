"""Do several encoders (a search's trials) differ beyond noise (``spread_test`` on
``joint_resamples``), and how many items would tell them, or a gain, apart."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields

import numpy as np

from doctune_core.noise.gain import Gain
from doctune_core.noise.rules import BOOTSTRAP_ROUNDS, LEVEL, check_paired
from doctune_core.outcomes import Outcomes


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
    """Whether ``observed`` (one objective per encoder) spreads more than noise: see the docstring
    of ``doctune_core.noise``. ``resampled`` comes from ``joint_resamples``; needs at least two
    encoders."""
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
