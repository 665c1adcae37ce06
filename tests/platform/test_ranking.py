"""The ranking's verdict in words (``platform.results.ranking.verdict``): what the terminal, the report and
the model card say about the winner's test gains."""

from __future__ import annotations

import re

import pytest

from doctune_core.noise import Gain, Spread
from platform.results.ranking import MAX_ITEMS_FACTOR, RankingNoise, verdict

TRIALS_APART = Spread(
    encoders=3, spread=0.013, noise_spread=0.005, p_value=0.01, difference_se=0.009, objective_se=0.016, rounds=1000
)


def _gain(difference: float, se: float) -> dict:
    return Gain(difference, difference - 1.96 * se, difference + 1.96 * se, se)


def _lines(gains: dict[str, Gain]) -> list[str]:
    return verdict(RankingNoise(tasks={}, trials=TRIALS_APART), gains)


def test_a_test_gain_within_noise_comes_with_the_items_that_would_tell_it():
    lines = _lines({"baseline": _gain(0.011, 0.0085), "baseline-converted": _gain(0.014, 0.0085)})
    assert "Nothing this search tried beat the base beyond noise on test at this budget." in lines
    assert any(line.startswith("Budget to tell test gains") for line in lines)
    budget = "\n".join(line for line in lines if line.startswith("  over "))  # a line for each row compared
    factors = [float(f) for f in re.findall(r"over baseline(?:-converted)?: about (\d+\.\d)×", budget)]
    # (1.96 + 0.84)^2 * (se / difference)^2: about 4.7x for the first, 2.9x for the second
    assert factors == [pytest.approx(4.7, abs=0.1), pytest.approx(2.9, abs=0.1)]


def test_a_gain_beyond_noise_needs_no_budget_and_none_or_a_tiny_one_has_none_worth_stating():
    assert not any(line.startswith("Budget") for line in _lines({"baseline": _gain(0.03, 0.008)}))
    lines = _lines({"baseline": _gain(-0.004, 0.008), "baseline-converted": _gain(0.0001, 0.008)})
    assert any(line.startswith("Budget") for line in lines)
    assert "  over baseline: none, it scored as high or higher" in lines
    assert f"  over baseline-converted: more than {MAX_ITEMS_FACTOR}×" in lines
