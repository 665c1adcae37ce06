"""Where a checkpoint a report names is found (trainers/checkpoint.py)."""

from __future__ import annotations

from trainers.checkpoint import checkpoint_in_run, trial_checkpoint_dir


def test_a_moved_or_fetched_run_finds_its_own_checkpoints(tmp_path):
    written_in = trial_checkpoint_dir(str(tmp_path / "first"), "t1") / "step_000004"
    written_in.mkdir(parents=True)
    moved = trial_checkpoint_dir(str(tmp_path / "second"), "t1") / "step_000004"
    # the run directory lacks it: the recorded path, wherever it is
    assert checkpoint_in_run(str(written_in), tmp_path / "second", "t1") == written_in
    moved.mkdir(parents=True)
    # it holds it: its own, even while the directory it was written in still exists
    assert checkpoint_in_run(str(written_in), tmp_path / "second", "t1") == moved
    assert checkpoint_in_run(str(written_in), tmp_path / "first", "t1") == written_in
