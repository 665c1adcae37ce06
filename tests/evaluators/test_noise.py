"""The paired bootstrap says whether a gain is beyond the noise of the test items."""

from __future__ import annotations

import numpy as np
import pytest

from evaluators.noise import paired_bootstrap
from evaluators.tasks.base import Outcomes, mean_of_rows


def _outcomes(values: np.ndarray) -> Outcomes:
    return Outcomes({"main": float(values.mean())}, values, mean_of_rows)


def test_the_interval_covers_a_known_difference():
    rng = np.random.default_rng(0)
    base = rng.uniform(0.2, 0.8, size=400)  # per-query scores of one system
    better = base + 0.03 + rng.normal(0, 0.05, size=400)  # another, 0.03 better on average
    gain = paired_bootstrap({"t": _outcomes(better)}, {"t": _outcomes(base)}, {"t": 1.0})
    assert gain.low < 0.03 < gain.high and gain.beyond_noise
    assert gain.difference == pytest.approx(float(np.mean(better - base)))
    # pairing matters: the same per-query noise shifted by 0 is no gain
    same = paired_bootstrap({"t": _outcomes(base)}, {"t": _outcomes(base + rng.normal(0, 0.05, size=400))}, {"t": 1.0})
    assert same.low < 0 < same.high and not same.beyond_noise


def test_coverage_of_the_95_percent_interval_is_about_95_percent():
    rng = np.random.default_rng(1)
    covered = 0
    for _ in range(200):
        a = rng.normal(0.5, 0.2, size=60)
        b = a - 0.02 + rng.normal(0, 0.1, size=60)  # true difference 0.02
        gain = paired_bootstrap(
            {"t": _outcomes(a)}, {"t": _outcomes(b)}, {"t": 1.0}, rounds=300, seed=int(rng.integers(1 << 30))
        )
        covered += gain.low <= 0.02 <= gain.high
    assert 0.88 <= covered / 200 <= 0.99


def test_tasks_combine_with_the_objective_weights_and_must_share_items():
    a = {"x": _outcomes(np.full(10, 0.9)), "y": _outcomes(np.full(20, 0.5))}
    b = {"x": _outcomes(np.full(10, 0.6)), "y": _outcomes(np.full(20, 0.5))}
    gain = paired_bootstrap(a, b, {"x": 1.0, "y": 2.0})
    assert gain.difference == pytest.approx(0.1) and gain.low == pytest.approx(0.1) and gain.beyond_noise
    with pytest.raises(ValueError, match="different items"):
        paired_bootstrap({"x": _outcomes(np.ones(3))}, {"x": _outcomes(np.ones(4))}, {"x": 1.0})


def test_a_standard_error_is_over_the_draws_when_there_are_several_else_a_bootstrap():
    values = np.random.default_rng(2).uniform(size=200)
    assert _outcomes(values).standard_error() == pytest.approx(values.std(ddof=1) / np.sqrt(200), rel=0.15)
    draws = np.array([0.5, 0.6, 0.7])
    with_draws = Outcomes({"main": 0.6}, values, mean_of_rows, draws)
    assert with_draws.standard_error() == pytest.approx(0.1 / np.sqrt(3))
