"""What an ended trial keeps (platform/rundir/retention.py), on real checkpoints written by the trainers'
own checkpoint code, in a run directory and in a bucket of a real S3 server (moto); the whole
search's side is in tests/test_search_smoke.py."""

from __future__ import annotations

import json

import pytest
import torch

from doctune_core.encoder import load_encoder
from evaluators.plan import EvalBudget, EvalPlan
from platform.rundir.retention import chosen_checkpoint, release
from trainers.checkpoint import save_checkpoint

TRIAL = "a1b2c3d4"
CHECKPOINTS = f"trials/{TRIAL}/checkpoints"


def _plan(*objectives: str) -> EvalPlan:
    named = {name: {"retrieval": 1.0, "probe": 1.0} for name in objectives}
    return EvalPlan(named, (), "test", EvalBudget(), max_length=32, batch_size=4, threads=1)


@pytest.fixture(scope="module")
def encoder(minilm_dir):
    return load_encoder(minilm_dir)


def _rounds(run_files, scratch, encoder, val_objectives: list[float | None]) -> list[str]:
    """One checkpoint per round, saved by the trainers' code and put in the run's files; a round with
    an objective gets scores.json (both tasks scoring it on validation, something else on test)."""
    model, tokenizer = encoder
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    made = []
    for round_, value in enumerate(val_objectives, 1):
        name = f"step_{2 * round_:06d}"
        saved = save_checkpoint(
            scratch / name,
            encoder=model,
            full_model=model,
            tokenizer=tokenizer,
            optimizer=optimizer,
            record={"step": 2 * round_},
            state={"step": 2 * round_, "eval_round": round_},
        )
        if value is not None:
            scores = {t: {"val": {"main": value}, "test": {"main": 1.0 - value}} for t in ("retrieval", "probe")}
            (saved / "scores.json").write_text(json.dumps(scores))
        for path in (p for p in saved.rglob("*") if p.is_file()):
            with path.open("rb") as source:
                run_files.write(f"{CHECKPOINTS}/{name}/{path.relative_to(saved).as_posix()}", source)
        made.append(name)
    return made


def _size(run_files) -> int:
    return sum(run_files.listing().values())


def test_best_keeps_the_rows_weights_only_and_every_rounds_scores(run_files, tmp_path, encoder):
    rounds = _rounds(run_files, tmp_path, encoder, [0.5, 0.7, 0.7])
    # a stopped trial's half-written checkpoint
    run_files.write_json(f"{CHECKPOINTS}/step_000008.partial/config.json", {"x": "x" * 1000})
    before = _size(run_files)
    assert chosen_checkpoint(run_files, TRIAL, _plan("objective")) == rounds[1]  # best, the earliest of a tie

    freed = release(run_files, TRIAL, _plan("objective"), "best")

    released = f"trials/{TRIAL}/released.json"
    assert freed == before - _size(run_files) + run_files.listing()[released]
    assert run_files.read_json(released) == {"policy": "best", "bytes": freed, "weights_kept": "step_000004"}
    assert release(run_files, TRIAL, _plan("objective"), "best") == 0  # a second sweep finds nothing
    kept = sum(run_files.listing(f"{CHECKPOINTS}/{rounds[1]}").values())
    assert _size(run_files) - kept < 10_000  # one model left; the other rounds' records and scores
    assert run_files.children(CHECKPOINTS) == rounds  # the half-written one is gone
    for name in rounds:
        entries = set(run_files.children(f"{CHECKPOINTS}/{name}"))
        if name == rounds[1]:
            assert {"model.safetensors", "config.json", "tokenizer.json", "doctune.json", "scores.json"} <= entries
            assert "training_state" not in entries
        else:
            assert entries == {"doctune.json", "scores.json"}
    with run_files.as_local_dir(f"{CHECKPOINTS}/{rounds[1]}") as kept_round:  # the kept round still loads
        model, _ = load_encoder(str(kept_round))
    assert sum(p.numel() for p in model.parameters()) > 0


def test_several_objectives_keep_the_last_round_as_their_rows_do(run_files, tmp_path, encoder):
    rounds = _rounds(run_files, tmp_path, encoder, [0.9, 0.2])
    release(run_files, TRIAL, _plan("quality", "speed"), "best")
    assert [run_files.is_file(f"{CHECKPOINTS}/{name}/model.safetensors") for name in rounds] == [False, True]


def test_all_keeps_every_rounds_weights_and_drops_the_training_state(run_files, tmp_path, encoder):
    rounds = _rounds(run_files, tmp_path, encoder, [0.5, 0.6])
    release(run_files, TRIAL, _plan("objective"), "all")
    for name in rounds:
        assert run_files.is_file(f"{CHECKPOINTS}/{name}/model.safetensors")
        assert not run_files.children(f"{CHECKPOINTS}/{name}/training_state")


def test_a_trial_with_nothing_scored_is_left_as_it_is(run_files, tmp_path, encoder):
    (name,) = _rounds(run_files, tmp_path, encoder, [None])
    before = _size(run_files)
    assert release(run_files, TRIAL, _plan("objective"), "best") == 0
    assert _size(run_files) == before and run_files.children(f"{CHECKPOINTS}/{name}/training_state")
