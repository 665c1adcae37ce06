"""Gain intervals at the shipped sizes (bench/gain_calibration.py): a small run of the benchmark's
own simulation on the recorded populations, and its stored calibration whole (RESULTS.md's tables
are checked against it in tests/bench/test_results_tables.py)."""

from __future__ import annotations

import argparse
import json

import pytest

from bench.gain_calibration import GAINS, calibrate, settings
from tests.conftest import ROOT

RECORDED = ROOT / "bench" / "results" / "recorded_outcomes.json"  # the 16-step population
# the calibration RESULTS.md shows, by profile (bench/gain_calibration.py's docstring)
CURRENT = {profile: ROOT / "bench" / "results" / f"gain_calibration_{profile}.json" for profile in ("local", "full")}


@pytest.mark.slow  # 300 simulated comparisons, 100 resamples each: about 15 s
def test_a_binary_part_never_gets_a_zero_width_interval_it_has_not_earned():
    """50 needle questions at 4,096 tokens, where the recorded rows found nothing and a trained row
    better by 0.02 wins a question here and there: the percentile bootstrap's interval is [0, 0]
    whenever no question went either way (about a third of the comparisons), and misses the gain
    then; the adopted one never is."""
    recorded = json.loads(RECORDED.read_text())
    args = argparse.Namespace(comparisons=300, rounds=100, paired_only=False)
    row = calibrate(recorded, "needle-retrieval", "full", "converted", 0, 0.02, args, seed=0)
    adopted, before = row["methods"]["paired t"], row["methods"]["percentile"]
    assert before["zero_width"] > 0.2 and adopted["zero_width"] == 0
    assert before["coverage"] < 0.8 < 0.9 < adopted["coverage"]


def test_every_setting_was_calibrated_at_every_gain_with_2000_comparisons_and_prints_an_interval():
    """The current calibration: the full profile's rows on the 64-step population, the local
    profile's on the population recorded at its own sizes; at the shipped sizes the rule for "too few
    items to decide" hides no row (the local needle and passkey parts hold 30 questions)."""
    stored = {}
    for profile, path in CURRENT.items():
        rows = json.loads(path.read_text())["rows"]
        assert {r["profile"] for r in rows} == {profile} and all(r["comparisons"] >= 2000 for r in rows)
        stored |= {(r["part"], r["profile"], r["pair"], r["seeds"], r["target"]): r for r in rows}
    assert {(*setting, gain) for setting in settings() for gain in GAINS} <= set(stored)
    assert all(row["interval_printed"] == 1 for row in stored.values())
