"""The tabular search-efficiency replay: exact traces on hand-made tables, the grid check, TPE on a
synthetic table, and the ``replay`` command's files."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bench.efficiency import (
    METHODS,
    Asha,
    AshaBracket,
    Event,
    aggregate,
    at_budgets,
    compare,
    costs,
    grid_order,
    grid_search,
    load_table,
    quartiles,
    random_asha,
    random_search,
    replay_order,
    steps_to_target,
    tpe_replay,
)
from bench.efficiency.cli import main
from bench.efficiency.report import json_safe
from tests.bench.tables import HAND, write_table

ROOT = Path(__file__).resolve().parents[2]
NAN = math.nan


@pytest.fixture
def hand(tmp_path):
    path = write_table(tmp_path, "hand", {"a": {"choice": ["x", "y", "z"]}}, 2, 5, lambda p, r: HAND[p["a"]][r - 1])
    return load_table(path)


def test_load_table_reads_the_grid(hand):
    assert hand.configs == ("c0", "c1", "c2")
    assert hand.steps == 10 and hand.rounds == 2 and hand.eval_every == 5
    np.testing.assert_array_equal(hand.val, [[0.5, 0.6], [0.4, 0.9], [0.7, 0.65]])
    np.testing.assert_array_equal(hand.test, [[0.9, 0.1], [0.95, 0.3], [0.2, 0.99]])
    assert [hand.config_at((i,)) for i in range(3)] == [0, 1, 2]


def test_trace_of_an_order_follows_the_best_validation_objective_not_the_best_test(hand):
    assert replay_order(hand, [0, 1, 2]).events == [
        (5, 1, 0.5, 0.9),
        (10, 1, 0.6, 0.1),
        (15, 2, 0.6, 0.1),  # y's round 1 (0.4) is worse
        (20, 2, 0.9, 0.3),  # y's round 2: the best validation objective, test 0.3
        (25, 3, 0.9, 0.3),
        (30, 3, 0.9, 0.3),  # z's test 0.99 is never picked
    ]
    assert replay_order(hand, [2, 0]).events == [
        (5, 1, 0.7, 0.2),
        (10, 1, 0.7, 0.2),
        (15, 2, 0.7, 0.2),
        (20, 2, 0.7, 0.2),
    ]


def test_ties_keep_the_earlier_checkpoint(tmp_path):
    rows = {"x": [(0.5, 0.1), (0.5, 0.2)], "y": [(0.5, 0.3), (0.4, 0.4)]}
    table = load_table(
        write_table(tmp_path, "tie", {"a": {"choice": ["x", "y"]}}, 2, 1, lambda p, r: rows[p["a"]][r - 1])
    )
    assert [event.test_of_pick for event in replay_order(table, [0, 1]).events] == [0.1, 0.1, 0.1, 0.1]


def test_random_runs_distinct_configurations_in_the_seeded_order(hand):
    for seed in range(5):
        order = np.random.default_rng(seed).choice(3, size=2, replace=False).tolist()
        assert random_search(hand, seed, 2).events == replay_order(hand, order).events
        assert len(set(order)) == 2
    with pytest.raises(ValueError, match="without replacement"):
        random_search(hand, 0, 4)


def test_asha_stops_the_second_trial_at_round_one(hand):
    # Rungs at rounds 2 and 1. x records 0.5 at rung 1 and runs on; y's round 1 (0.4) is below the
    # cutoff (the median of {0.5}) so y stops: its round 2 (0.9, the best of the table) is never seen.
    # z's round 1 (0.7) beats the median of {0.5, 0.4} and z runs to the end.
    run = replay_order(hand, [0, 1, 2], asha=True)
    assert run.rounds == [2, 1, 2]
    assert run.events == [
        (5, 1, 0.5, 0.9),
        (10, 1, 0.6, 0.1),
        (15, 2, 0.6, 0.1),
        (20, 3, 0.7, 0.2),
        (25, 3, 0.7, 0.2),
    ]
    for seed in range(5):
        order = np.random.default_rng(seed).choice(3, size=3, replace=False).tolist()
        assert random_asha(hand, seed, 3).events == replay_order(hand, order, asha=True).events


def test_asha_bracket_matches_ray():
    bracket = AshaBracket(10, Asha(grace_period=1, reduction_factor=2))
    assert [milestone for milestone, _ in bracket.rungs] == [8, 4, 2, 1]
    # Ray's _Bracket docstring: 2, then 4 at rung 1 continue; 1 stops (cutoff 3); the cutoff with 1 is 2
    assert not bracket.on_trial_result(1, 1, 2.0)
    assert not bracket.on_trial_result(2, 1, 4.0)
    assert bracket.on_trial_result(3, 1, 1.0)
    assert sorted(bracket.rungs[-1][1].values()) == [1.0, 2.0, 4.0]
    assert not bracket.on_trial_result(1, 3, 0.0)  # round 3 fills rung 2, empty so far: no cutoff
    assert bracket.rungs[-2][1] == {1: 0.0}
    assert bracket.on_trial_result(2, 10, 9.0)  # max_t stops without a cutoff
    assert not bracket.on_trial_result(4, 1, NAN)  # a NaN report is never below a cutoff
    assert not bracket.on_trial_result(5, 1, 2.0)  # nanpercentile leaves the NaN out: the median of 1, 2, 4 is 2
    assert bracket.on_trial_result(6, 1, 1.9)  # the median of 1, 2, 2, 4 is 2


def test_a_failed_configuration_costs_its_steps_and_is_never_picked(tmp_path):
    rows = {"x": [(None, None), (None, None)], "y": [(0.3, 0.5), (0.2, 0.6)], "z": [(0.1, 0.7), (0.4, 0.8)]}
    table = load_table(
        write_table(tmp_path, "failed", {"a": {"choice": ["x", "y", "z"]}}, 2, 5, lambda p, r: rows[p["a"]][r - 1])
    )
    trace = replay_order(table, [0, 1]).events
    assert [event.consumed for event in trace] == [5, 10, 15, 20]
    assert trace[0].best_val == -math.inf and math.isnan(trace[0].test_of_pick)
    assert trace[2:] == [(15, 2, 0.3, 0.5), (20, 2, 0.3, 0.5)]
    # ASHA leaves the failure out of the rung: z's 0.1 is compared with y's 0.3 alone and stops
    assert replay_order(table, [0, 1, 2], asha=True).events[-1] == (25, 3, 0.3, 0.5)


TWO_D = {"a": {"choice": ["x", "y"]}, "b": {"uniform": [0.1, 0.2, 0.3]}}


def test_grid_visits_the_grid_in_nested_loops_of_seeded_orders(tmp_path):
    table = load_table(write_table(tmp_path, "two", TWO_D, 1, 1, lambda p, r: (p["b"], p["b"])))
    outer_seen, inner_orders = set(), set()
    for seed in range(20):
        order = grid_order(table, seed)
        assert sorted(order) == list(range(6))
        points = [table.grid[c] for c in order]
        # the outer dimension changes only between blocks; every block repeats one inner order
        for outer, inner, block in ((0, 1, 3), (1, 0, 2)):
            blocks = [points[i : i + block] for i in range(0, 6, block)]
            if all(len({p[outer] for p in b}) == 1 for b in blocks) and all(
                [p[inner] for p in b] == [p[inner] for p in blocks[0]] for b in blocks
            ):
                outer_seen.add(outer)
                inner_orders.add(tuple(p[inner] for p in blocks[0]))
                break
        else:
            pytest.fail(f"seed {seed}: {points} is not a nested-loop order")
        assert grid_search(table, seed, 4).events == replay_order(table, order[:4]).events
    assert outer_seen == {0, 1}  # the seed shuffles which dimension is the outer loop
    assert len(inner_orders) > 2  # and the order of the values along it


def test_load_table_rejects_an_incomplete_grid(tmp_path):
    path = write_table(
        tmp_path, "holes", TWO_D, 2, 1, lambda p, r: (0.5, 0.5), skip=lambda p: p == {"a": "y", "b": 0.2}
    )
    with pytest.raises(ValueError, match=r"1 configuration\(s\) of the grid are missing: a=y, b=0.2"):
        load_table(path)


def test_load_table_rejects_missing_rounds_and_values_off_the_grid(tmp_path):
    path = write_table(tmp_path, "short", TWO_D, 2, 1, lambda p, r: (0.5, 0.5))
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:-1]) + "\n")
    with pytest.raises(ValueError, match="missing rounds"):
        load_table(path)
    path.write_text("\n".join(lines).replace(",0.3\n", ",0.35\n", 1) + "\n")
    with pytest.raises(ValueError, match="not on the grid"):
        load_table(path)


# A smooth synthetic table: the objective peaks at x = 0.8, lr = 1e-3, depth = 4, recipe b.
SMOOTH = {
    "x": {"uniform": [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]},
    "lr": {"loguniform": [1e-5, 1e-4, 1e-3]},
    "depth": {"int": [1, 2, 4]},
    "recipe": {"choice": ["a", "b"]},
}


def smooth(point: dict, round_: int) -> tuple[float, float]:
    value = (
        1.0
        - (point["x"] - 0.8) ** 2
        - 0.1 * (math.log10(point["lr"]) + 3) ** 2
        - 0.05 * (point["depth"] - 4) ** 2
        - 0.3 * (point["recipe"] == "a")
    )
    return value * round_ / 2, value * round_ / 2 - 0.01


@pytest.fixture
def smooth_table(tmp_path):
    return load_table(write_table(tmp_path, "smooth", SMOOTH, 2, 3, smooth))


def test_snapping_is_to_the_nearest_grid_value(smooth_table):
    lr, x, depth = smooth_table.space["lr"], smooth_table.space["x"], smooth_table.space["depth"]
    assert lr.index(3.5e-5) == 1  # nearer 1e-4 than 1e-5 in log space (and nearer 1e-5 linearly)
    assert lr.index(2.9e-5) == 0
    assert x.index(0.29) == 1 and x.index(0.31) == 2
    assert depth.index(3) in (1, 2) and depth.index(4) == 2
    assert lr.distribution().values == (1e-5, 1e-3) and depth.distribution().values == (1, 4)


def test_tpe_lands_on_the_table_and_beats_random(smooth_table):
    for seed in range(3):
        run = tpe_replay(smooth_table, seed, 24, multivariate=True, asha=False)
        assert len(run.configs) == 24 and all(0 <= c < len(smooth_table.configs) for c in run.configs)
        assert run.events[-1].consumed == 24 * smooth_table.steps  # repeats are run (and paid for) again
        assert len(set(run.configs)) < 24  # TPE comes back to the good region
    samples = 12  # TPE: 3 random start-up trials, 9 guided; 108 configurations
    tpe = np.median([METHODS["tpe"](smooth_table, seed, samples).events[-1].best_val for seed in range(50)])
    rnd = np.median([METHODS["random"](smooth_table, seed, samples).events[-1].best_val for seed in range(50)])
    assert tpe > rnd + 0.05, (tpe, rnd)


def test_tpe_asha_spends_less_than_tpe(smooth_table):
    full = METHODS["tpe"](smooth_table, 0, 16).events
    halved = METHODS["tpe_asha"](smooth_table, 0, 16).events
    assert full[-1].consumed == 16 * smooth_table.steps
    assert halved[-1].consumed < full[-1].consumed


def test_at_budgets_is_a_step_function_of_steps_or_of_compute_with_start_up():
    trace = [Event(10, 1, 0.5, 0.1), Event(20, 2, 0.7, 0.2)]
    best, test = at_budgets(trace, np.array([5, 10, 15, 20, 30]))
    np.testing.assert_array_equal(best, [NAN, 0.5, 0.5, 0.7, 0.7])
    np.testing.assert_array_equal(test, [NAN, 0.1, 0.1, 0.2, 0.2])
    np.testing.assert_array_equal(costs(trace, 2.5), [12.5, 25.0])  # each trial started pays 2.5
    best, _ = at_budgets(trace, np.array([12.0, 12.5, 24.9, 25.0]), startup=2.5)
    np.testing.assert_array_equal(best, [NAN, 0.5, 0.5, 0.7])


def test_quartiles_rank_minus_infinity_lowest():
    p25, median, p75 = quartiles(np.array([[-math.inf], [1.0], [2.0], [3.0]]))
    assert p25[0] == -math.inf and median[0] == 1.5 and p75[0] == 2.25
    np.testing.assert_array_equal(quartiles(np.array([[1.0], [2.0], [3.0]]))[:, 0], [1.5, 2.0, 2.5])


def _two_trials(values: list[tuple[float, float]]) -> list[Event]:
    """Four rounds of 5 steps: two trials of two rounds each."""
    return [Event(5 * (i + 1), i // 2 + 1, best, test) for i, (best, test) in enumerate(values)]


RANDOM_RUNS = [
    _two_trials([(0.1, 0.0), (0.2, 0.0), (0.5, 0.1), (0.6, 0.2)]),
    _two_trials([(0.3, 0.0), (0.4, 0.0), (0.4, 0.1), (0.8, 0.3)]),
    _two_trials([(0.2, 0.0), (0.2, 0.0), (0.7, 0.1), (0.7, 0.4)]),
]


def test_aggregate_summarises_over_seeds_and_finds_randoms_final_median(hand):
    fast = [[Event(5, 1, 0.7, 0.5)]] * 3
    result = aggregate(hand, {"random": RANDOM_RUNS, "fast": fast}, {"random": 2, "fast": 1})
    assert result["budgets"] == [5, 10, 15, 20]
    assert result["random_target"] == {"budget": 20, "best_val": 0.7}
    random_entry = result["methods"]["random"]
    assert random_entry["curve"]["best_val"]["median"] == [0.2, 0.2, 0.5, 0.7]
    assert result["methods"]["fast"]["curve"]["best_val"]["median"] == [0.7] * 4  # held after its end
    assert random_entry["final_best_val"] == pytest.approx({"median": 0.7, "p25": 0.65, "p75": 0.75})
    assert random_entry["final_test_of_pick"]["median"] == 0.3
    assert result["methods"]["fast"]["final_steps"]["median"] == 5


def test_steps_to_target_reads_the_median_curve_in_steps_or_in_compute():
    assert steps_to_target(RANDOM_RUNS, 0.7) == 20  # the median reaches 0.7 with the last round
    assert steps_to_target(RANDOM_RUNS, 0.7, startup=1.0) == 22  # two start-ups paid by then
    assert steps_to_target([[Event(5, 1, 0.7, 0.5)]] * 3, 0.7, startup=1.0) == 6
    slow = [[Event(5 * k, k, 0.1 * k, 0.5) for k in range(1, 6)]]  # 0.5 at best
    assert steps_to_target(slow, 0.7) == math.inf


def test_replay_command_writes_json_and_png_and_resumes_from_its_cache(smooth_table, tmp_path, capsys):
    csv_path, out, cache = tmp_path / "smooth.csv", tmp_path / "out", tmp_path / "cache"
    methods = ["random:4", "grid:4", "tpe:5", "tpe_independent:5", "random_asha:6", "tpe_asha:6"]
    command = ["replay", "--table", str(csv_path), "--methods", *methods, "--seeds", "3", "--batches", "2"]
    assert main([*command, "--out", str(out), "--cache", str(cache)]) == 0
    assert (out / "smooth.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    written = json.loads((out / "smooth.json").read_text())
    samples = {m.split(":")[0]: int(m.split(":")[1]) for m in methods}
    expected = compare(smooth_table, samples, batches=2, seeds=3)
    assert _without_timings(written) == json.loads(json.dumps(json_safe(_without_timings(expected))))
    assert written["methods"]["tpe"]["samples"] == 5 and written["methods"]["random"]["seeds"] == 3
    assert len(written["intervals"]["methods"]["tpe"]["per_batch"]["steps_to_target"]) == 2
    (kept,) = cache.iterdir()
    assert len(list(kept.glob("*.json"))) == 2 * len(methods)  # one file per method and batch
    printed = capsys.readouterr().out
    assert "| method | trials | median final steps |" in printed and "Across 2 batches of 3 seeds" in printed
    # a second run replays nothing: every batch comes from the cache, and the figures are the same
    assert main([*command, "--out", str(tmp_path / "again"), "--cache", str(cache)]) == 0
    assert "replayed in" not in capsys.readouterr().out.split("\nsmooth:")[0]
    again = json.loads((tmp_path / "again" / "smooth.json").read_text())
    assert _without_timings(again) == _without_timings(written)
    # two processes filling a fresh cache replay the same seeds to the same figures
    parallel = ["--out", str(tmp_path / "parallel"), "--cache", str(tmp_path / "cache2"), "--jobs", "2"]
    assert main([*command, *parallel]) == 0
    in_parallel = json.loads((tmp_path / "parallel" / "smooth.json").read_text())
    assert _without_timings(in_parallel) == _without_timings(written)


def _without_timings(result: dict) -> dict:
    return {
        **result,
        "methods": {n: {k: v for k, v in e.items() if k != "seconds_per_seed"} for n, e in result["methods"].items()},
    }


def test_replay_runs_as_a_script_from_anywhere(tmp_path):
    path = write_table(tmp_path, "hand", {"a": {"choice": ["x", "y", "z"]}}, 2, 5, lambda p, r: HAND[p["a"]][r - 1])
    done = subprocess.run(
        [
            *(sys.executable, str(ROOT / "bench" / "search_efficiency.py"), "replay", "--table", str(path)),
            *("--methods", "random:3", "tpe:2", "--seeds", "2", "--out", str(tmp_path / "out"), "--no-cache"),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "| random | 3 | 30 | 0.9000 (0.9000-0.9000) | 0.3000 (0.3000-0.3000) |" in done.stdout
    assert "One batch of 2 seeds (no spread measured" in done.stdout
    assert json.loads((tmp_path / "out" / "hand.json").read_text())["random_target"] == {"budget": 30, "best_val": 0.9}


def test_bad_method_is_refused(capsys):
    with pytest.raises(SystemExit):
        main(["replay", "--table", "x.csv", "--methods", "annealing:4"])
    assert "NAME:SAMPLES" in capsys.readouterr().err
    for seconds in ("-1", "nan", "soon"):
        with pytest.raises(SystemExit):
            main(["replay", "--table", "x.csv", "--startup-seconds", seconds])
        assert "a number of seconds, 0 or more" in capsys.readouterr().err
