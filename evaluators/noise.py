"""Is a gain beyond noise? A paired bootstrap over the same test items.

Two encoders scored on the same part of the same tasks (``Task.outcomes``: one row per query,
document or pair) are compared by resampling the items with replacement, the same resample for
both, and recomputing the difference of their (weighted) main scores each time (Efron &
Tibshirani, *An Introduction to the Bootstrap*, 1993, ch. 16; the paired form is the standard one
for comparing two systems on one test collection, e.g. Sakai, SIGIR 2006). The 95% percentile
interval of those differences says whether the gain is beyond the noise of the test items: it is
when the interval excludes 0. Tasks are resampled independently; a probe's draws stay fixed
(both encoders are scored with the same draws), so the interval covers the test documents' noise,
not the few-shot draws' (``main_se`` of a probe covers those).
"""

from __future__ import annotations

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

    @property
    def beyond_noise(self) -> bool:
        return self.low > 0 or self.high < 0

    def describe(self) -> str:
        verdict = "beyond noise" if self.beyond_noise else "within noise"
        return f"{self.difference:+.4f} ({self.level:.0%} interval {self.low:+.4f} to {self.high:+.4f}: {verdict})"

    def record(self) -> dict:
        return asdict(self) | {"beyond_noise": self.beyond_noise}

    @classmethod
    def from_record(cls, record: dict) -> Gain:
        return cls(**{f.name: record[f.name] for f in fields(cls)})


def paired_bootstrap(
    a: dict[str, Outcomes],
    b: dict[str, Outcomes],
    weights: dict[str, float],
    rounds: int = BOOTSTRAP_ROUNDS,
    seed: int = 0,
    level: float = LEVEL,
) -> Gain:
    """The weighted mean over ``weights``' tasks of main(a) - main(b), and its interval."""
    for task in weights:
        if len(a[task].items) != len(b[task].items):
            raise ValueError(f"{task}: the two encoders were scored on different items")
    total = sum(weights.values())

    def difference(pick: dict[str, np.ndarray | slice]) -> float:
        return (
            sum(
                w * (a[t].statistic(a[t].items[pick[t]]) - b[t].statistic(b[t].items[pick[t]]))
                for t, w in weights.items()
            )
            / total
        )

    rng = np.random.default_rng(seed)
    resampled = [
        difference({t: rng.integers(0, len(a[t].items), len(a[t].items)) for t in weights}) for _ in range(rounds)
    ]
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(resampled, [tail, 100 - tail])
    return Gain(difference({t: slice(None) for t in weights}), float(low), float(high), rounds, level)
