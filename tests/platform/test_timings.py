"""The wall-time account: trial seconds become wall seconds through the trials' concurrency."""

from __future__ import annotations

import pytest

from platform.rundir.timings import PhaseClock, trial_seconds


def _clock(wall: float, phases: dict[str, float]) -> PhaseClock:
    clock = PhaseClock()
    clock.began -= wall  # as if the search had run for `wall` seconds
    clock.phases = phases
    return clock


def test_one_trial_at_a_time_splits_the_wall_exactly():
    clock = _clock(100.0, {"ray start": 5.0, "baseline": 10.0, "trials": 80.0})
    summary = clock.summary({"train_seconds": 50.0, "eval_seconds": 20.0, "wall_seconds": 75.0})
    shares = summary["shares"]
    assert summary["trials"]["mean_concurrency"] == 1.0
    assert shares["training"] == pytest.approx(0.50, abs=1e-3)
    assert shares["evaluation"] == pytest.approx(0.30, abs=1e-3)  # the trials' 20 s and the baseline's 10 s
    assert shares["overhead"] == pytest.approx(0.20, abs=1e-3)  # Ray start, 5 s inside trials, 5 s between them
    assert summary["trials"]["start_up_checkpoints_and_reports_seconds"] == pytest.approx(5.0)


def test_two_trials_at_once_count_their_seconds_once_on_the_wall():
    clock = _clock(100.0, {"trials": 100.0})
    summary = clock.summary({"train_seconds": 160.0, "eval_seconds": 20.0, "wall_seconds": 200.0})
    assert summary["trials"]["mean_concurrency"] == pytest.approx(2.0)
    assert summary["shares"]["training"] == pytest.approx(0.80, abs=1e-3)
    assert summary["shares"]["overhead"] == pytest.approx(0.10, abs=1e-3)
    assert sum(summary["shares"].values()) == pytest.approx(1.0)


def test_a_resumed_call_counts_only_the_rounds_it_ran():
    """Tune's result grid of a resumed search holds the trials that finished before the interruption;
    their rounds (reported before ``since``) belong to the earlier call. An interrupted trial is
    restarted by Tune, so its ``time_total_s`` starts again in this call."""
    import pandas as pd
    from ray.tune import Result

    def result(rows: list[tuple[int, float, float, float]]) -> Result:  # (timestamp, train, eval, total)
        frame = pd.DataFrame(rows, columns=["timestamp", "train_seconds", "eval_seconds", "time_total_s"])
        return Result(metrics=frame.iloc[-1].to_dict(), checkpoint=None, error=None, path="", metrics_dataframe=frame)

    earlier = result([(1000, 10.0, 5.0, 20.0), (1030, 10.0, 5.0, 45.0)])
    resumed = result([(2000, 0.0, 0.0, 3.0), (2040, 12.0, 6.0, 40.0)])
    assert trial_seconds([earlier, resumed], since=1990.5) == {
        "train_seconds": 12.0,
        "eval_seconds": 6.0,
        "wall_seconds": 40.0,
    }
    assert trial_seconds([earlier, resumed])["wall_seconds"] == 85.0  # a first call counts every trial
