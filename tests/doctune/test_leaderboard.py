"""``doctune.Leaderboard``: the leaderboard the driver writes, read back from ``leaderboard.json`` as
``evaluators.leaderboard.write_leaderboard`` writes it, in the one row type the driver builds."""

from __future__ import annotations

import pytest

from doctune import Gain, Leaderboard, LeaderboardRow
from doctune_core.noise import TaskGain
from evaluators.leaderboard import write_leaderboard


def _row(trial: str, objective: float | None, **fields) -> LeaderboardRow:
    scores = {"news-title-retrieval": {"val": {"main": objective}}} if objective is not None else {}
    return LeaderboardRow(trial, "completed", objective, 8, f"/models/{trial}", {"lr": 1e-4}, scores, **fields)


def _board(tmp_path, rows: list[LeaderboardRow]) -> Leaderboard:
    write_leaderboard(rows, tmp_path, ["news-title-retrieval"], noise={"beyond_noise": False})
    return Leaderboard.read(tmp_path)


def test_best_is_the_top_trial_even_where_a_baseline_and_a_reference_score_above_every_trial(tmp_path):
    over_base = Gain(0.031, -0.012, 0.074, 0.02, 40.0)
    undecided = TaskGain(0.05, None, None, undecided="11 binary items, 30 needed")
    rows = [
        _row("trial_b", 0.61),
        _row("baseline", 0.70),
        _row("trial_failed", None),
        _row("reference-minilm-512", 0.72),
        _row("baseline-converted", 0.58),
        _row(
            "trial_a",
            0.64,
            gains={"baseline": over_base},
            task_gains={"baseline": {"needle-retrieval": undecided}},
            test_objective=0.62,
        ),
    ]
    board = _board(tmp_path, rows)
    assert [row.trial for row in board.rows] == [
        "reference-minilm-512",
        "baseline",
        "trial_a",
        "trial_b",
        "baseline-converted",
        "trial_failed",
    ]
    best = board.best
    assert best.trial == "trial_a" and best.kind == "trial" and best.test_objective == 0.62
    assert [row.trial for row in board.trials] == ["trial_a", "trial_b", "trial_failed"]
    assert [row.trial for row in board.baselines] == ["baseline", "baseline-converted"]
    assert [row.trial for row in board.references] == ["reference-minilm-512"]
    # the gains typed, with their verdict words
    gain = best.gains["baseline"]
    assert isinstance(gain, Gain) and not gain.beyond_noise
    assert "within noise; seed noise not included" in gain.describe()
    assert (
        best.task_gains["baseline"]["needle-retrieval"]
        .describe()
        .endswith("(too few items to decide: 11 binary items, 30 needed; seed noise not included)")
    )
    assert best.score("news-title-retrieval") == 0.64 and best.score("news-title-retrieval", "test") is None
    assert board.noise == {"beyond_noise": False} and board.run_dir == tmp_path
    assert best == next(row for row in rows if row.trial == "trial_a")  # read back as it was written


def test_a_run_with_no_scored_trial_has_no_best(tmp_path):
    board = _board(tmp_path, [_row("baseline", 0.7), _row("trial_failed", None)])
    with pytest.raises(ValueError, match=rf"no trial of the run in {tmp_path} was scored"):
        _ = board.best


def test_the_driver_and_a_caller_read_one_row_type():
    """The rows the results side builds are the public rows: no second type to keep in step."""
    import evaluators.leaderboard

    assert LeaderboardRow is evaluators.leaderboard.LeaderboardRow
    assert Leaderboard is evaluators.leaderboard.Leaderboard
