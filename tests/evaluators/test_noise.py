"""The paired bootstrap says whether a gain is beyond the noise of the test items."""

from __future__ import annotations

import numpy as np
import pytest

from evaluators.noise import Gain, items_needed, items_to_tell, joint_resamples, paired_bootstrap, spread_test
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


def test_a_standard_error_is_a_bootstrap_over_the_items_and_adds_the_draws_where_there_are_several():
    values = np.random.default_rng(2).uniform(size=200)
    items_only = values.std(ddof=1) / np.sqrt(200)
    assert _outcomes(values).standard_error() == pytest.approx(items_only, rel=0.15)
    draws = np.array([0.5, 0.6, 0.7])
    with_draws = Outcomes({"main": 0.6}, values, mean_of_rows, draws)
    errors = with_draws.standard_errors()
    assert errors["main_se_draws"] == pytest.approx(0.1 / np.sqrt(3))
    assert errors["main_se_items"] == pytest.approx(items_only, rel=0.15)
    assert errors["main_se"] == pytest.approx(np.hypot(errors["main_se_items"], 0.1 / np.sqrt(3)))


def _search(rng: np.random.Generator, effects: list[float], items: int = 60, noise: float = 0.15) -> list[dict]:
    """One simulated search: per-item outcomes of trials scored on the same items (a shared item
    difficulty, each trial's own effect and its own per-item noise)."""
    difficulty = rng.uniform(0.2, 0.8, size=items)
    return [{"t": _outcomes(difficulty + effect + rng.normal(0, noise, size=items))} for effect in effects]


DIFFERENCE_SE = np.sqrt(2) * 0.15 / np.sqrt(60)  # the standard error of a paired difference in _search


@pytest.mark.parametrize(
    ("effects", "called", "bound"),
    [
        ([0.0] * 4, "at most", 0.07),  # identical configurations
        ([3 * DIFFERENCE_SE, 0.0, 0.0, 0.0], "at least", 0.80),  # one better by 3 standard errors of a difference
        ([3 * DIFFERENCE_SE, 0.0], "at least", 0.80),
    ],
)
def test_the_spread_verdict_is_calibrated_on_simulated_searches(effects, called, bound):
    rng = np.random.default_rng(7)
    beyond = 0
    for search in range(200):
        observed, resampled = joint_resamples(_search(rng, effects), {"t": 1.0}, rounds=300, seed=search)
        beyond += spread_test(observed, resampled).beyond_noise
    share = beyond / 200
    assert share <= bound if called == "at most" else share >= bound


def test_a_spread_reports_its_noise_and_the_difference_standard_error():
    rng = np.random.default_rng(3)
    observed, resampled = joint_resamples(_search(rng, [0.0, 0.0, 0.0], items=400), {"t": 1.0}, rounds=500)
    spread = spread_test(observed, resampled)
    assert spread.difference_se == pytest.approx(np.sqrt(2) * 0.15 / np.sqrt(400), rel=0.2)
    # each trial's objective carries the shared item noise as well: its own error is larger
    assert spread.objective_se > spread.difference_se / np.sqrt(2)
    assert not spread.beyond_noise and spread.ratio < 2
    assert items_needed(spread, 400) is None or spread.true_spread > 0


def test_items_needed_shrinks_noise_to_the_power_a_true_spread_needs():
    rng = np.random.default_rng(4)
    effects = [0.0, 0.01, 0.02, 0.03]  # a real but small spread, hidden at 40 items
    observed, resampled = joint_resamples(_search(rng, effects, items=40), {"t": 1.0}, rounds=500)
    spread = spread_test(observed, resampled)
    needed = items_needed(spread, 40)
    assert needed is not None and needed > 40
    # at that many items the same trials are called apart in most simulated searches
    rng = np.random.default_rng(5)
    calls = []
    for _ in range(60):
        observed, resampled = joint_resamples(_search(rng, effects, items=int(needed)), {"t": 1.0}, rounds=200)
        calls.append(spread_test(observed, resampled).beyond_noise)
    assert np.mean(calls) >= 0.5  # the estimate rests on one noisy spread: aim, not guarantee


def _gain_at(rng: np.random.Generator, items: int, difference: float, noise: float) -> Gain:
    """A paired bootstrap of two encoders whose per-item scores differ by ``difference`` on average."""
    a = rng.uniform(0.2, 0.8, size=items)
    b = a - difference + rng.normal(0, noise, size=items)
    return paired_bootstrap(
        {"t": _outcomes(a)}, {"t": _outcomes(b)}, {"t": 1.0}, rounds=300, seed=int(rng.integers(1 << 30))
    )


def test_items_to_tell_a_gain_reach_the_power_it_aims_for():
    # a true gain of 0.02 at 60 items of noise 0.1: within noise in most searches
    rng = np.random.default_rng(6)
    difference, noise, items = 0.02, 0.1, 60
    se = noise / np.sqrt(items)
    exact = Gain(difference, difference - 1.96 * se, difference + 1.96 * se, rounds=0)
    factor = items_to_tell(exact)
    assert factor == pytest.approx(((1.96 + 0.8416) * se / difference) ** 2, rel=1e-3) and factor > 1
    called = [_gain_at(rng, round(items * factor), difference, noise).beyond_noise for _ in range(150)]
    assert 0.68 <= np.mean(called) <= 0.92  # 80% power, within 150 searches' sampling error
    # no gain to find, no budget; a gain already beyond noise needs no more items than today's
    assert items_to_tell(Gain(-0.01, -0.03, 0.01, rounds=0)) is None
    assert items_to_tell(Gain(0.05, 0.04, 0.06, rounds=0)) == 1.0


def test_resamples_pick_draws_as_well_as_items_and_keep_every_encoder_on_the_same_ones():
    truth = np.array([0, 1, 0, 1])
    predictions = [np.array([0, 1, 0, 1]), np.array([1, 0, 1, 0])]  # a perfect draw and a wrong one
    items = np.column_stack([truth, *predictions])
    from functools import partial

    from evaluators.tasks.probe import accuracy, mean_over_draws

    outcomes = Outcomes(
        {"main": 0.5}, items, partial(mean_over_draws, width=1, measure=accuracy), np.array([1.0, 0.0]), 1
    )
    assert outcomes.draw_count == 2 and outcomes.value() == 0.5
    assert outcomes.value(draws=np.array([0, 0])) == 1.0 and outcomes.value(draws=np.array([1, 1])) == 0.0
    observed, resampled = joint_resamples([{"p": outcomes}, {"p": outcomes}], {"p": 1.0}, rounds=50)
    assert list(observed) == [0.5, 0.5] and resampled.std() > 0.1  # the draws moved it
    assert np.array_equal(resampled[:, 0], resampled[:, 1])  # the same draws for both encoders
    with pytest.raises(ValueError, match="different items"):
        joint_resamples([{"p": outcomes}, {"p": _outcomes(np.ones(4))}], {"p": 1.0})
