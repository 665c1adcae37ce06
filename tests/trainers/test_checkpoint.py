"""Where a checkpoint a report names is found, and what a trial records beside its checkpoints
(trainers/checkpoint.py), in a run directory and in a bucket."""

from __future__ import annotations

import io

from trainers.checkpoint import (
    checkpoint_in_run,
    divergence,
    drop_superseded_training_state,
    record_divergence,
    reported_rounds,
    step_name,
    trial_checkpoint_dir,
)


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


def test_only_the_latest_reported_round_keeps_its_training_state(run_files):
    for step in (2, 4, 6):
        for name in ("model.safetensors", "training_state/optimizer.safetensors"):
            run_files.write(f"trials/t1/checkpoints/{step_name(step)}/{name}", io.BytesIO(b"w"))
    assert reported_rounds(run_files, "t1") == ["step_000002", "step_000004", "step_000006"]
    assert drop_superseded_training_state(run_files, "t1", "step_000004") == ["step_000002"]
    assert drop_superseded_training_state(run_files, "t1", "step_000006") == ["step_000004"]
    for step, kept in (
        (2, ["model.safetensors"]),
        (4, ["model.safetensors"]),
        (6, ["model.safetensors", "training_state"]),
    ):
        assert run_files.children(f"trials/t1/checkpoints/{step_name(step)}") == kept


def test_a_diverged_trial_says_where(run_files):
    assert divergence(run_files, "t1") is None
    record_divergence(run_files, "t1", 7, float("nan"))
    assert divergence(run_files, "t1") == "loss became nan at step 7"
