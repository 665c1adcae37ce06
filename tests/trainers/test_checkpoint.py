"""Where a checkpoint a report names is found, and what a trial records beside its checkpoints
(trainers/checkpoint.py), in a run directory and in a bucket."""

from __future__ import annotations

import io

from trainers.checkpoint import (
    divergence,
    drop_superseded_training_state,
    record_divergence,
    recorded_checkpoint,
    reported_rounds,
    step_name,
)


def test_a_moved_or_fetched_run_finds_its_own_checkpoints(run_files):
    """A report names its checkpoint by its path where it was written; the run finds it by the name
    inside its own files, wherever they now are."""
    for written_in in ("/old/run/trials/t1/checkpoints/step_000004", "bucket/runs/a/trials/t1/checkpoints/step_000004"):
        name = recorded_checkpoint(written_in, "t1")
        assert name == "trials/t1/checkpoints/step_000004"
        assert run_files.path(name) == f"{run_files.root}/{name}" and run_files.relative(run_files.path(name)) == name
    assert run_files.relative("/elsewhere/trials/t1/checkpoints/step_000004") is None


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
