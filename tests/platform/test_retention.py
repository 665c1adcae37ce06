"""What an ended trial keeps on disk (platform/retention.py), on real checkpoints written by the
trainers' own checkpoint code; the whole search's side is in tests/test_search_smoke.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from core.encoder import load_encoder
from evaluators.plan import EvalBudget, EvalPlan
from platform.leaderboard import chosen_checkpoint
from platform.retention import release
from trainers.checkpoint import save_checkpoint, trial_checkpoint_dir

TRIAL = "a1b2c3d4"


def _plan(*objectives: str) -> EvalPlan:
    named = {name: {"retrieval": 1.0, "probe": 1.0} for name in objectives}
    return EvalPlan(named, (), "test", EvalBudget(), max_length=32, batch_size=4, threads=1)


@pytest.fixture(scope="module")
def encoder(minilm_dir):
    return load_encoder(minilm_dir)


def _rounds(run_dir: Path, encoder, val_objectives: list[float | None]) -> list[Path]:
    """One checkpoint per round; a round with an objective gets scores.json (both tasks scoring it
    on validation, something else on test)."""
    model, tokenizer = encoder
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    made = []
    for round_, value in enumerate(val_objectives, 1):
        step = 2 * round_
        target = trial_checkpoint_dir(str(run_dir), TRIAL) / f"step_{step:06d}"
        save_checkpoint(
            target,
            encoder=model,
            full_model=model,
            tokenizer=tokenizer,
            optimizer=optimizer,
            record={"step": step},
            state={"step": step, "eval_round": round_},
        )
        if value is not None:
            scores = {t: {"val": {"main": value}, "test": {"main": 1.0 - value}} for t in ("retrieval", "probe")}
            (target / "scores.json").write_text(json.dumps(scores))
        made.append(target)
    return made


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def test_best_keeps_the_rows_weights_only_and_every_rounds_scores(tmp_path, encoder):
    rounds = _rounds(tmp_path, encoder, [0.5, 0.7, 0.7])
    leftover = rounds[0].with_name("step_000008.partial")  # a stopped trial's half-written checkpoint
    leftover.mkdir()
    (leftover / "model.safetensors").write_bytes(b"x" * 1000)
    before = _size(tmp_path)
    assert chosen_checkpoint(rounds[0].parent, _plan("objective")) == rounds[1]  # best, the earliest of a tie

    freed = release(tmp_path, TRIAL, _plan("objective"), "best")

    assert freed == before - _size(tmp_path) + (tmp_path / "trials" / TRIAL / "released.json").stat().st_size
    assert json.loads((tmp_path / "trials" / TRIAL / "released.json").read_text()) == {
        "policy": "best",
        "bytes": freed,
        "weights_kept": "step_000004",
    }
    assert release(tmp_path, TRIAL, _plan("objective"), "best") == 0  # a second sweep finds nothing
    assert _size(tmp_path) - _size(rounds[1]) < 10_000  # one model left; the other rounds' records and scores
    assert not leftover.exists()
    for checkpoint in rounds:
        files = {p.name for p in checkpoint.iterdir()}
        if checkpoint == rounds[1]:
            assert {"model.safetensors", "config.json", "tokenizer.json", "doctune.json", "scores.json"} <= files
            assert "training_state" not in files
        else:
            assert files == {"doctune.json", "scores.json"}
    model, _ = load_encoder(str(rounds[1]))  # the kept round still loads
    assert sum(p.numel() for p in model.parameters()) > 0


def test_several_objectives_keep_the_last_round_as_their_rows_do(tmp_path, encoder):
    rounds = _rounds(tmp_path, encoder, [0.9, 0.2])
    release(tmp_path, TRIAL, _plan("quality", "speed"), "best")
    assert (rounds[1] / "model.safetensors").exists() and not (rounds[0] / "model.safetensors").exists()


def test_all_keeps_every_rounds_weights_and_drops_the_training_state(tmp_path, encoder):
    rounds = _rounds(tmp_path, encoder, [0.5, 0.6])
    release(tmp_path, TRIAL, _plan("objective"), "all")
    assert all((c / "model.safetensors").exists() and not (c / "training_state").exists() for c in rounds)


def test_a_trial_with_nothing_scored_is_left_as_it_is(tmp_path, encoder):
    rounds = _rounds(tmp_path, encoder, [None])
    before = _size(tmp_path)
    assert release(tmp_path, TRIAL, _plan("objective"), "best") == 0
    assert _size(tmp_path) == before and (rounds[0] / "training_state").is_dir()
