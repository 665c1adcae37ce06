"""The replay's statistics on hand-made tables whose answers are known: the figures of each batch of
seeds and their spread, the start-up charged in step-equivalents, and how well validation ranks
configurations the way test does."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest
from scipy.stats import spearmanr

from bench.efficiency import intervals, load_table, rank_correlation, replay_order
from bench.efficiency.diagnostics import agreement, diagnostics
from tests.bench.tables import HAND, write_table
from tests.conftest import ROOT

X, Y, Z = 0, 1, 2  # the hand table's configurations


@pytest.fixture
def hand(tmp_path):
    # two configurations trained in 330 s, one merged untimed, one trained in 105 s: 145 s each
    runs = [
        {"configurations": 2, "wall_seconds": 330},
        {"configurations": 0, "merged": 1, "wall_seconds": None},
        {"configurations": 1, "wall_seconds": 105},
    ]
    path = write_table(
        tmp_path,
        "hand",
        {"a": {"choice": ["x", "y", "z"]}},
        2,
        5,
        lambda p, r: HAND[p["a"]][r - 1],
        recorded={"made_by": {"runs": runs}},
    )
    return load_table(path)


def test_start_up_is_charged_in_the_tables_step_equivalents(hand, tmp_path):
    assert hand.seconds_per_configuration == 145  # (330 + 105) / 3; the merge timed nothing
    # 145 s = 20 s of start-up + 10 steps of 12.5 s: the start-up is worth 1.6 steps
    assert hand.startup_steps(20.0) == pytest.approx(1.6)
    with pytest.raises(ValueError, match="not less than"):
        hand.startup_steps(145.0)
    untimed = load_table(write_table(tmp_path, "untimed", {"a": {"choice": ["x", "y"]}}, 1, 1, lambda p, r: (0.1, 0.1)))
    assert untimed.seconds_per_configuration is None and untimed.startup_steps(20.0) is None


def test_a_new_machines_base_stage_is_not_charged_to_the_configurations(tmp_path):
    # 890 s for two configurations, of which 600 s trained the base first: 145 s each
    runs = [{"configurations": 2, "wall_seconds": 890, "base_stage_seconds": 600}]
    recorded = {"made_by": {"runs": runs}}
    path = write_table(tmp_path, "new", {"a": {"choice": ["x", "y"]}}, 1, 1, lambda p, r: (0.1, 0.1), recorded=recorded)
    assert load_table(path).seconds_per_configuration == 145


def test_only_runs_without_a_gpu_time_a_configuration(tmp_path):
    """The start-up charged per trial was measured on 2 CPUs: a GPU run's quicker configurations
    would turn it into more training steps than it is, so they are left out of the per-configuration time."""
    runs = [
        {"configurations": 2, "wall_seconds": 900, "machine": "2 CPUs (AMD EPYC), no GPU"},
        {"configurations": 10, "wall_seconds": 500, "machine": "16 CPUs (Intel Xeon), 1 x NVIDIA H200"},
    ]
    path = write_table(
        tmp_path,
        "mixed",
        {"a": {"choice": ["x", "y"]}},
        1,
        1,
        lambda p, r: (0.1, 0.1),
        recorded={"made_by": {"runs": runs}},
    )
    assert load_table(path).seconds_per_configuration == 450
    gpu_only = write_table(
        tmp_path,
        "gpu",
        {"a": {"choice": ["x", "y"]}},
        1,
        1,
        lambda p, r: (0.1, 0.1),
        recorded={"made_by": {"runs": runs[1:]}},
    )
    assert load_table(gpu_only).seconds_per_configuration is None  # nothing to set a CPU start-up against


def test_each_batch_and_the_spread_across_batches(hand):
    """Two batches of one seed. Random search: batch 0 runs x then y (target 0.9, found with the last
    round: 20 steps, 22 with two start-ups of 1 step), batch 1 runs z then x (target 0.7, found at once:
    5 steps, 6). The other method runs y alone in batch 0 (0.9 after 10 steps, 11 charged; at random's
    compute, 22, its pick's test is 0.3 as random's) and x alone in batch 1 (never reaches 0.7; its pick's
    test 0.1 against random's 0.2)."""
    batches = [
        {"random": [replay_order(hand, [X, Y])], "other": [replay_order(hand, [Y])]},
        {"random": [replay_order(hand, [Z, X])], "other": [replay_order(hand, [X])]},
    ]
    result = intervals(batches, {"random": 2, "other": 1}, steps=hand.steps, startup=1.0)
    random, other = result["random"], result["other"]
    assert random["per_batch"] == {
        "steps_to_target": [20, 5],
        "compute_to_target": [22, 6],
        "test_vs_random": [0, 0],
    }
    assert other["per_batch"]["steps_to_target"] == [10, math.inf]
    assert other["per_batch"]["compute_to_target"] == [11, math.inf]
    assert other["per_batch"]["test_vs_random"] == pytest.approx([0.0, -0.1])
    # across batches, order statistics: of two values the 10th and 50th percentiles are the lower one
    assert random["steps_to_target"] == {"p10": 5, "p50": 5, "p90": 20, "never": 0}
    assert other["steps_to_target"] == {"p10": 10, "p50": 10, "p90": math.inf, "never": 1}
    assert other["steps_to_target_vs_random_budget"] == {"p10": 0.5, "p50": 0.5, "p90": math.inf}  # of 20 steps
    assert other["compute_to_target_vs_random_budget"] == {"p10": 0.5, "p50": 0.5, "p90": math.inf}  # of 22
    assert other["steps_to_target_vs_random"] == {"p10": 0.5, "p50": 0.5, "p90": math.inf}  # 10 / 20, inf / 5
    assert random["compute_to_target_vs_random"] == {"p10": 1, "p50": 1, "p90": 1}
    assert other["test_vs_random"] == pytest.approx({"p10": -0.1, "p50": -0.1, "p90": 0.0})


def test_rank_correlation_is_spearmans_rho_row_by_row():
    rng = np.random.default_rng(0)
    x, y = rng.integers(0, 4, size=(5, 12)).astype(float), rng.normal(size=(5, 12))  # ties in x
    expected = [spearmanr(a, b).statistic for a, b in zip(x, y, strict=True)]
    np.testing.assert_allclose(rank_correlation(x, y), expected)


# Five configurations whose last round ranks test against validation (rho -0.6: squared rank
# differences 9, 1, 4, 9, 9) and whose best validation round, the first, ranks them nearly alike
# (rho 0.8: 1, 1, 0, 1, 1); a sixth failed in every round.
LAST_TEST_RANKS = [4, 3, 5, 1, 2]
BEST_TEST_RANKS = [2, 1, 3, 5, 4]


def ranked(point: dict, round_: int) -> tuple[float | None, float | None]:
    k = point["k"]
    if k == 6:
        return None, None
    if round_ == 1:
        return 10.0 + k, 0.1 * BEST_TEST_RANKS[k - 1]
    return float(k), 0.1 * LAST_TEST_RANKS[k - 1]


def test_diagnostics_give_the_rank_correlation_of_validation_and_test(tmp_path):
    space = {"k": {"int": [1, 2, 3, 4, 5, 6]}}
    table = load_table(write_table(tmp_path, "ranked", space, 2, 1, ranked))
    d = diagnostics(table)
    assert d["configurations"] == 5 and d["val_range"] == 4.0 and d["test_of_best_val"] == pytest.approx(0.2)
    assert d["baseline_val"] is None and "records no baseline" in d["sensible"]
    last, best = d["spearman"]["last_round"], d["spearman"]["best_round"]
    assert last["all"]["rho"] == pytest.approx(-0.6) and best["all"]["rho"] == pytest.approx(0.8)
    assert last["all"]["configurations"] == best["all"]["configurations"] == 5  # the failed one left out
    assert last["sensible"] == last["all"]  # no baseline: every finite configuration is sensible
    # top half by validation: k = 3, 4, 5; test ranks 5, 1, 2 at the last round (rho -0.5), 3, 5, 4 at
    # the best (rho 0.5)
    assert last["sensible_top_half"]["rho"] == pytest.approx(-0.5)
    assert best["sensible_top_half"]["rho"] == pytest.approx(0.5)
    assert last["all"]["p05"] <= last["all"]["rho"] <= last["all"]["p95"]


def test_sensible_configurations_are_at_or_above_the_untouched_base(tmp_path):
    space = {"k": {"int": [1, 2, 3, 4, 5, 6]}}
    baseline = {"baseline": {"val_objective": 2.5, "test_objective": 0.3}}
    table = load_table(write_table(tmp_path, "ranked", space, 2, 1, ranked, recorded=baseline))
    d = diagnostics(table)
    assert d["baseline_val"] == 2.5 and "untouched base" in d["sensible"]
    last, best = d["spearman"]["last_round"], d["spearman"]["best_round"]
    # last round: only k = 3, 4, 5 reach 2.5 (test ranks 5, 1, 2: rho -0.5); their top half is two
    # configurations, too few for a rank correlation
    assert last["sensible"]["configurations"] == 3 and last["sensible"]["rho"] == pytest.approx(-0.5)
    assert last["sensible_top_half"] == {"configurations": 2, "rho": None, "p05": None, "p95": None}
    # every best round (11 to 15) is above the base
    assert best["sensible"]["configurations"] == 5 and best["sensible"]["rho"] == pytest.approx(0.8)


def test_a_table_being_built_is_diagnosed_and_compared_with_another_on_the_configurations_both_hold(tmp_path):
    """A partial table is read only when asked for (never replayed); two tables of the same grid agree
    on the configurations both hold, up to an affine change of scale."""
    space = {"k": {"int": [1, 2, 3, 4, 5, 6]}, "v": {"choice": ["a", "b"]}}

    def scores(point, round_):
        value = point["k"] * (1 if point["v"] == "a" else 1.5)
        return value * round_, 10 - value

    whole = write_table(tmp_path, "whole", space, 2, 1, scores)
    built = tmp_path / "built"
    built.mkdir()

    def rescaled(point, round_):
        val, test = scores(point, round_)
        return 0.5 * val + 1, test

    noise = {"noise": {"objective_se": 0.5}}  # the objective's standard error at the table's parts
    half = write_table(built, "half", space, 2, 1, rescaled, lambda p: p["k"] > 3, recorded=noise)
    with pytest.raises(ValueError, match="6 configuration"):
        load_table(half)
    table = load_table(half, partial=True)
    d = diagnostics(table)
    assert d["configurations"] == 6 and d["se_over_spread"] == pytest.approx(0.5 / d["val_std"])
    # how far the ratio moves with the configurations held: an interval around it, none without noise
    low, high = d["se_over_spread_interval"]
    assert low < d["se_over_spread"] < high
    assert diagnostics(load_table(whole))["se_over_spread_interval"] is None
    agreed = agreement(table, load_table(whole))
    assert agreed["configurations"] == 6
    assert agreed["val"]["pearson"]["r"] == pytest.approx(1.0) and agreed["val"]["spearman"]["r"] == pytest.approx(1.0)
    assert agreed["test"]["pearson"]["r"] == pytest.approx(1.0)
    assert agreed["val_std"][0] == pytest.approx(0.5 * agreed["val_std"][1])  # this table's, the other's
    reversed_ = write_table(built, "reversed", space, 2, 1, lambda p, r: (-scores(p, r)[0], 0.0))
    # a configuration that diverged in one table is left out, not allowed to blank the comparison
    diverged = write_table(
        built, "diverged", space, 2, 1, lambda p, r: (math.nan, 0.0) if p["k"] == 1 else scores(p, r)
    )
    partly = agreement(table, load_table(diverged))
    assert (partly["configurations"], partly["val"]["configurations"]) == (6, 4)
    assert partly["val"]["spearman"]["r"] == pytest.approx(1.0)
    opposite = agreement(table, load_table(reversed_))
    assert opposite["val"]["spearman"]["r"] == pytest.approx(-1.0)
    assert opposite["test"]["pearson"] == {"r": None, "p05": None, "p95": None}  # its test objective is constant
    # the command prints the same, as JSON
    command = ["diagnose", "--table", str(half), "--partial", "--against", str(whole)]
    printed = subprocess.run(
        [sys.executable, "bench/search_efficiency.py", *command],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    result = json.loads(printed)
    assert (result["configurations"], result["grid"], result["against"]["configurations"]) == (6, 12, 6)
