"""A gain's interval says whether it is beyond the noise of the items, the draws and the seeds; a
search's spread says whether its trials differ beyond noise."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest
from scipy import stats

from doctune_core.noise import (
    Gain,
    SeedSpread,
    items_needed,
    items_to_tell,
    joint_resamples,
    paired_gain,
    paired_proportions_variance,
    seed_mean_gain,
    spread_test,
    too_few_to_decide,
)
from doctune_core.outcomes import Outcomes, mean_of_rows


def _outcomes(values: np.ndarray, binary: bool = False) -> Outcomes:
    return Outcomes({"main": float(values.mean())}, values, mean_of_rows, binary=binary)


def test_the_interval_covers_a_known_difference():
    rng = np.random.default_rng(0)
    base = rng.uniform(0.2, 0.8, size=400)  # per-query scores of one system
    better = base + 0.03 + rng.normal(0, 0.05, size=400)  # another, 0.03 better on average
    gain = paired_gain({"t": _outcomes(better)}, {"t": _outcomes(base)}, {"t": 1.0})
    assert gain.low < 0.03 < gain.high and gain.beyond_noise
    assert gain.difference == pytest.approx(float(np.mean(better - base)))
    assert gain.standard_error == pytest.approx(np.std(better - base, ddof=1) / 20, rel=0.02)
    # pairing matters: the same per-query noise shifted by 0 is no gain
    same = paired_gain({"t": _outcomes(base)}, {"t": _outcomes(base + rng.normal(0, 0.05, size=400))}, {"t": 1.0})
    assert same.low < 0 < same.high and not same.beyond_noise


def test_coverage_of_the_95_percent_interval_is_about_95_percent():
    rng = np.random.default_rng(1)
    covered = 0
    for _ in range(400):
        a = rng.normal(0.5, 0.2, size=60)
        b = a - 0.02 + rng.normal(0, 0.1, size=60)  # true difference 0.02
        gain = paired_gain({"t": _outcomes(a)}, {"t": _outcomes(b)}, {"t": 1.0})
        covered += gain.low <= 0.02 <= gain.high
    assert 0.91 <= covered / 400 <= 0.98


def test_tasks_combine_with_the_objective_weights_and_must_share_items():
    a = {"x": _outcomes(np.full(10, 0.9)), "y": _outcomes(np.full(20, 0.5))}
    b = {"x": _outcomes(np.full(10, 0.6)), "y": _outcomes(np.full(20, 0.5))}
    gain = paired_gain(a, b, {"x": 1.0, "y": 2.0})
    # every item of each part differs by the same: a gain over several parts takes no pseudo-items, and
    # its items leave an interval no width: they say what they did instead of [0.1, 0.1]
    assert gain.difference == pytest.approx(0.1) and gain.low is None and not gain.beyond_noise
    assert gain.agreement == "items all moved alike within each task: x: 10 by +0.300; y: 20 by +0.000"
    assert "no interval" in gain.describe() and "0.1000 to" not in gain.describe()
    # alone, x gets them: 0.3 either way, over 12
    alone = paired_gain({"x": a["x"]}, {"x": b["x"]}, {"x": 1.0})
    assert alone.standard_error == pytest.approx(np.sqrt(((10 * 0.09 + 2 * 0.09) / 12 - (3 / 12) ** 2) / 12))
    with pytest.raises(ValueError, match="different items"):
        paired_gain({"x": _outcomes(np.ones(3))}, {"x": _outcomes(np.ones(4))}, {"x": 1.0})


def test_a_binary_part_where_the_rows_never_disagree_still_gets_the_width_its_items_earn():
    # 40 questions, both rows right on the same 10: the plain bootstrap's interval was [0, 0]
    right = np.r_[np.ones(10), np.zeros(30)]
    gain = paired_gain({"t": _outcomes(right, binary=True)}, {"t": _outcomes(right.copy(), binary=True)}, {"t": 1.0})
    assert gain.difference == 0 and gain.standard_error == 0 and not gain.beyond_noise
    # the gains g whose own variance, |g| - g^2 over 40 without a disagreement, holds 0: |g| <= t^2 / (40 + t^2)
    t = stats.t.ppf(0.975, 39)
    assert gain.high == pytest.approx(t**2 / (40 + t**2), abs=1e-5) and gain.low == pytest.approx(-gain.high, abs=1e-5)


def test_a_binary_parts_interval_is_tangos_score_interval_and_a_combinations_moves_its_parts_together():
    # Tango (1998): 44 pairs, 8 only a right, 2 only b right; each end's variance is that of its own gain
    a = _outcomes(np.r_[np.ones(8), np.zeros(2), np.ones(20), np.zeros(14)], binary=True)
    b = _outcomes(np.r_[np.zeros(8), np.ones(2), np.ones(20), np.zeros(14)], binary=True)
    gain = paired_gain({"t": a}, {"t": b}, {"t": 1.0})
    t = stats.t.ppf(0.975, 43)
    for end in (gain.low, gain.high):
        assert abs(gain.difference - end) == pytest.approx(
            t * np.sqrt(paired_proportions_variance(8, 2, 44, end) / 44), abs=1e-5
        )
    assert gain.standard_error == pytest.approx(np.sqrt((10 / 44 - (6 / 44) ** 2) / 44))
    assert gain.high - gain.difference > gain.difference - gain.low  # a larger gain would have varied more
    # the Wald interval at the observed gain, as adopted before, is symmetric about it
    wald = paired_gain({"t": a}, {"t": b}, {"t": 1.0}, binary_score=False, pseudo_items=0.0)
    assert wald.high - wald.difference == pytest.approx(wald.difference - wald.low)
    # a continuous part alone keeps the plain t interval
    rng = np.random.default_rng(9)
    c, d = _outcomes(rng.uniform(size=50)), _outcomes(rng.uniform(size=50))
    plain = paired_gain({"t": c}, {"t": d}, {"t": 1.0})
    assert plain.high - plain.difference == pytest.approx(
        stats.t.ppf(0.975, plain.degrees_of_freedom) * plain.standard_error
    )
    # beside it, a binary part that never disagreed still widens the combination at gains away from 0
    never = _outcomes(np.r_[np.ones(5), np.zeros(45)], binary=True)
    both = paired_gain({"t": c, "n": never}, {"t": d, "n": never}, {"t": 1.0, "n": 1.0})
    alone = paired_gain({"t": c}, {"t": d}, {"t": 1.0}, pseudo_items=0.0)  # a combination's parts take none
    assert both.standard_error == pytest.approx(alone.standard_error / 2)
    assert both.high - both.low > (plain.high - plain.low) / 2


def test_too_few_items_to_decide_by_the_rule_and_a_combination_decided_by_its_weight():
    rng = np.random.default_rng(2)
    small = _outcomes((rng.uniform(size=11) < 0.5).astype(float), binary=True)
    assert too_few_to_decide(small) == "11 binary items, 30 needed"
    assert too_few_to_decide(_outcomes(rng.uniform(size=9))) == "9 continuous items, 10 needed"
    assert too_few_to_decide(_outcomes(rng.uniform(size=30) < 0.5, binary=True)) is None
    alone = paired_gain({"n": small}, {"n": small}, {"n": 1.0})
    assert alone.low is None and not alone.beyond_noise
    assert "too few items to decide: 11 binary items, 30 needed; seed noise not included" in alone.describe()
    # the objective: the small part holds a third of the weight, the rest decides it
    big_a, big_b = _outcomes(rng.uniform(size=60)), _outcomes(rng.uniform(size=60))
    weights = {"n": 0.5, "r": 1.0}
    decided = paired_gain({"n": small, "r": big_a}, {"n": small, "r": big_b}, weights)
    assert decided.low is not None and decided.low < decided.difference < decided.high
    undecided = paired_gain({"n": small, "r": big_a}, {"n": small, "r": big_b}, {"n": 1.5, "r": 1.0})
    assert undecided.low is None and undecided.undecided == "n: 11 binary items, 30 needed"


def test_measured_seeds_widen_the_interval_by_their_spread_and_their_few_degrees_of_freedom():
    rng = np.random.default_rng(3)
    a, b = _outcomes(rng.uniform(size=200)), _outcomes(rng.uniform(size=200))
    plain = paired_gain({"t": a}, {"t": b}, {"t": 1.0})
    three = paired_gain({"t": a}, {"t": b}, {"t": 1.0}, SeedSpread(0.05, 3))
    two = paired_gain({"t": a}, {"t": b}, {"t": 1.0}, SeedSpread(0.05, 2))
    assert not plain.seed_noise and "seed noise not included" in plain.describe()
    assert three.seed_noise and "seed noise" not in three.describe()
    assert three.standard_error == pytest.approx(np.hypot(plain.standard_error, 0.05))
    assert plain.high - plain.low < three.high - three.low < two.high - two.low
    assert two.degrees_of_freedom < three.degrees_of_freedom < plain.degrees_of_freedom


def test_a_probe_macro_f1_item_variance_is_its_influence_values_variance():
    from doctune_core.noise import item_variance
    from evaluators.tasks.probe_metrics import macro_f1, macro_f1_influence

    rng = np.random.default_rng(4)
    truth = rng.integers(0, 5, 300)
    predicted = np.where(rng.uniform(size=300) < 0.6, truth, rng.integers(0, 5, 300))
    influence = macro_f1_influence(truth, predicted)
    assert influence.sum() == pytest.approx(0.0, abs=1e-9)
    jackknife = np.array([macro_f1(np.delete(truth, i), np.delete(predicted, i)) for i in range(300)])
    assert np.var(influence, ddof=1) / 300 == pytest.approx(
        299 / 300 * np.sum((jackknife - jackknife.mean()) ** 2), rel=0.05
    )
    # the same through a probe's outcomes against a row that is always right
    from evaluators.tasks.probe_metrics import mean_over_draws, mean_over_draws_influence

    def probe(items):
        return Outcomes(
            {},
            items,
            partial(mean_over_draws, width=1, measure=macro_f1),
            draw_width=1,
            influence=partial(mean_over_draws_influence, measure=macro_f1_influence),
        )

    mine, perfect = probe(np.column_stack([truth, predicted])), probe(np.column_stack([truth, truth]))
    assert item_variance(mine, perfect, rng) == pytest.approx(np.var(influence, ddof=1) / 300)


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
    """The paired gain of two encoders whose per-item scores differ by ``difference`` on average."""
    a = rng.uniform(0.2, 0.8, size=items)
    b = a - difference + rng.normal(0, noise, size=items)
    return paired_gain({"t": _outcomes(a)}, {"t": _outcomes(b)}, {"t": 1.0})


def test_items_to_tell_a_gain_reach_the_power_it_aims_for():
    # a true gain of 0.02 at 60 items of noise 0.1: within noise in most searches
    rng = np.random.default_rng(6)
    difference, noise, items = 0.02, 0.1, 60
    se = noise / np.sqrt(items)
    exact = Gain(difference, difference - 1.96 * se, difference + 1.96 * se)
    factor = items_to_tell(exact)
    assert factor == pytest.approx(((1.96 + 0.8416) * se / difference) ** 2, rel=1e-3) and factor > 1
    called = [_gain_at(rng, round(items * factor), difference, noise).beyond_noise for _ in range(150)]
    assert 0.68 <= np.mean(called) <= 0.92  # 80% power, within 150 searches' sampling error
    # no gain to find, no budget; a gain already beyond noise needs no more items than today's
    assert items_to_tell(Gain(-0.01, -0.03, 0.01)) is None
    assert items_to_tell(Gain(0.05, 0.04, 0.06)) == 1.0


def test_resamples_pick_draws_as_well_as_items_and_keep_every_encoder_on_the_same_ones():
    truth = np.array([0, 1, 0, 1])
    predictions = [np.array([0, 1, 0, 1]), np.array([1, 0, 1, 0])]  # a perfect draw and a wrong one
    items = np.column_stack([truth, *predictions])
    from functools import partial

    from evaluators.tasks.probe_metrics import accuracy, mean_over_draws

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


def test_a_probe_draws_term_leaves_out_the_item_noise_its_items_term_already_holds():
    """Draws that differ only by each document's own luck (no draw is better than another) add
    item noise to the per-draw scores, not draw noise: the draws' term keeps a small share of it."""
    from doctune_core.noise import draw_variance, item_variance
    from evaluators.tasks.probe_metrics import (
        draw_values,
        macro_f1,
        macro_f1_influence,
        mean_over_draws,
        mean_over_draws_influence,
    )

    def probe(items):
        return Outcomes(
            {},
            items,
            partial(mean_over_draws, width=1, measure=macro_f1),
            draw_values(items, 1, macro_f1),
            draw_width=1,
            influence=partial(mean_over_draws_influence, measure=macro_f1_influence),
        )

    rng = np.random.default_rng(5)
    kept, raw = [], []
    for _ in range(20):
        truth = rng.integers(0, 4, 300)
        a, b = (
            probe(
                np.column_stack(
                    [truth, *(np.where(rng.uniform(size=300) < 0.7, truth, rng.integers(0, 4, 300)) for _ in range(5))]
                )
            )
            for _ in range(2)
        )
        variance, dof = draw_variance(a, b, item_variance(a, b, rng))
        kept.append(variance)
        raw.append(np.var(a.draws - b.draws, ddof=1) / 5)
        # the term's share of Satterthwaite's sum is the gross variance's, net term clipped or not:
        # the interval does not jump narrower where the net term crosses 0
        assert variance**2 / dof == pytest.approx(raw[-1] ** 2 / 4)
    assert np.mean(kept) < np.mean(raw) / 2
    assert min(kept) < 1e-6 * np.mean(raw)  # some came out at or below 0 and were clipped


def test_a_probe_of_two_draws_is_too_few_to_decide():
    from evaluators.tasks.probe_metrics import draw_values, macro_f1, mean_over_draws

    rng = np.random.default_rng(6)
    truth = rng.integers(0, 4, 300)

    def probe(draws: int) -> Outcomes:
        guesses = [np.where(rng.uniform(size=300) < 0.7, truth, rng.integers(0, 4, 300)) for _ in range(draws)]
        items = np.column_stack([truth, *guesses])
        draws_mean = partial(mean_over_draws, width=1, measure=macro_f1)
        return Outcomes({}, items, draws_mean, draw_values(items, 1, macro_f1), 1)

    assert too_few_to_decide(probe(2)) == "2 few-shot draws, 3 needed"
    assert too_few_to_decide(probe(3)) is None
    gain = paired_gain({"p": probe(2)}, {"p": probe(2)}, {"p": 1.0})
    assert gain.low is None and "too few items to decide: 2 few-shot draws, 3 needed" in gain.describe()


def test_a_seeds_mean_gain_adds_the_seeds_spread_to_the_runs_item_noise():
    rng = np.random.default_rng(3)
    base = rng.normal(0.5, 0.2, 200)
    # three training runs of one configuration, scored on the same items: gains 0.04, 0.06, 0.08
    runs = [
        paired_gain({"t": _outcomes(base + g + rng.normal(0, 0.05, 200))}, {"t": _outcomes(base)}, {"t": 1.0})
        for g in (0.04, 0.06, 0.08)
    ]
    mean = seed_mean_gain(runs)
    differences = [r.difference for r in runs]
    assert mean.difference == pytest.approx(np.mean(differences))
    assert mean.seed_noise and "seed noise not included" not in mean.describe()
    assert mean.runs == 3 and "the mean of 3 training runs" in mean.describe()
    assert Gain.from_record(mean.record()) == mean
    items = np.mean([r.standard_error**2 for r in runs])
    assert mean.standard_error**2 == pytest.approx(items + np.var(differences, ddof=1) / 3)
    # the seeds' term has 2 degrees of freedom: a wider t than any single run's
    assert mean.degrees_of_freedom < min(r.degrees_of_freedom for r in runs)
    assert mean.high - mean.low > max(r.high - r.low for r in runs)
    assert mean.beyond_noise  # every run gains, and the seeds agree closely enough
    # runs that disagree in sign leave the mean within noise
    spread = [Gain(d, d - 0.01, d + 0.01, 0.005, 100.0) for d in (-0.05, 0.02, 0.09)]
    assert not seed_mean_gain(spread).beyond_noise
    # one run too few items to decide: no interval, and why
    undecided = Gain(0.1, None, None, undecided="11 binary items, 30 needed")
    assert seed_mean_gain([runs[0], undecided]).undecided == "11 binary items, 30 needed"
    with pytest.raises(ValueError, match="at least 2 runs"):
        seed_mean_gain(runs[:1])
    # never narrower than the seeds' own t interval: two runs' spread has one degree of freedom, and
    # Satterthwaite's would give it more (bench/seed_mean_calibration.py: 87% coverage at a large spread)
    two = [Gain(d, d - 0.0196, d + 0.0196, 0.01, 1000.0) for d in (0.03, 0.07)]
    mean = seed_mean_gain(two)
    seeds_t = stats.t.ppf(0.975, 1) * np.std([0.03, 0.07], ddof=1) / np.sqrt(2)
    assert mean.high - mean.difference == pytest.approx(seeds_t) and mean.low == pytest.approx(0.05 - seeds_t)
    assert mean.high - mean.difference > stats.t.ppf(0.975, mean.degrees_of_freedom) * mean.standard_error


def test_no_interval_of_no_width_where_no_item_disagreed_or_every_item_moved_alike():
    """Items that never disagree, or all move by one amount, give no interval of no width: the gain
    says so with its count (a gain over several continuous parts, and a probe whose rows predicted
    alike, had printed [0, 0])."""
    same = {"x": _outcomes(np.full(40, 0.7)), "y": _outcomes(np.full(20, 0.4))}
    gain = paired_gain(same, same, {"x": 1.0, "y": 1.0})
    assert gain.low is None and gain.high is None and gain.agreement == "no item of 60 disagreed"
    assert gain.describe() == "+0.0000 (no item of 60 disagreed: no interval; seed noise not included)"
    assert gain.cell() == "+0.000 (no item of 60 disagreed)"
    up = {"x": _outcomes(np.full(40, 0.72)), "y": _outcomes(np.full(20, 0.42))}
    moved = paired_gain(up, same, {"x": 1.0, "y": 1.0})
    assert moved.agreement == "every item of 60 moved by +0.020" and moved.difference == pytest.approx(0.02)
    assert Gain.from_record(moved.record()) == moved
    from evaluators.tasks.probe_metrics import (
        draw_values,
        macro_f1,
        macro_f1_influence,
        mean_over_draws,
        mean_over_draws_influence,
    )

    rng = np.random.default_rng(3)
    items = np.column_stack([rng.integers(0, 4, 200), rng.integers(0, 4, (200, 3))])  # truth, 3 draws
    probe = Outcomes(
        {},
        items,
        partial(mean_over_draws, width=1, measure=macro_f1),
        draw_values(items, 1, macro_f1),
        draw_width=1,
        influence=partial(mean_over_draws_influence, measure=macro_f1_influence),
    )
    alike = paired_gain({"r8": probe}, {"r8": probe}, {"r8": 1.0})
    assert alike.low is None and alike.agreement == "no item of 200 disagreed"


def test_a_verdict_on_a_part_where_at_most_two_items_disagreed_says_how_many():
    """Where the rows seldom disagree the interval may over-cover (it keeps every gain the part cannot
    rule out): a verdict resting on two disagreeing items of 40 says so; one on more does not."""
    right = np.r_[np.ones(10), np.zeros(30)]
    two = right.copy()
    two[[20, 21]] = 1.0  # two questions the trained row alone got right
    gain = paired_gain({"t": _outcomes(two, binary=True)}, {"t": _outcomes(right, binary=True)}, {"t": 1.0})
    assert (gain.disagreed, gain.items) == (2, 40) and "2 of 40 items disagreed" in gain.describe()
    many = right.copy()
    many[20:26] = 1.0
    gain = paired_gain({"t": _outcomes(many, binary=True)}, {"t": _outcomes(right, binary=True)}, {"t": 1.0})
    assert gain.disagreed == 6 and "disagreed" not in gain.describe()


def test_a_seeds_mean_on_binary_parts_keeps_the_width_its_questions_earn():
    """Three runs of a configuration on 40 questions, none of which any run answered apart from the
    base: each run's variance at its observed gain is 0, so a mean made of those alone had an interval
    of no width. The mean's interval is Tango's score interval on the runs' components: the gains 40
    questions cannot rule out, as one run's own interval has them."""
    base = _outcomes(np.r_[np.ones(10), np.zeros(30)], binary=True)
    runs = [paired_gain({"t": base}, {"t": base}, {"t": 1.0}) for _ in range(3)]
    assert all(run.standard_error == 0 and run.low < 0 < run.high for run in runs)
    mean = seed_mean_gain(runs)
    assert mean.low == pytest.approx(runs[0].low, abs=1e-5) and mean.high == pytest.approx(runs[0].high, abs=1e-5)
    assert mean.disagreed == 0 and "0 of 40 items disagreed" in mean.describe()
