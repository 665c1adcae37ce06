"""Trial checkpoints: an ordinary model directory plus what training needs to resume.

Layout of ``<run_dir>/trials/<trial_id>/checkpoints/step_000040/``::

    config.json, model.safetensors, tokenizer files   the encoder (AutoModel loads it)
    doctune.json                                      recipe, hyperparameters, base model, corpus, step
    training_state/model.safetensors                  the full trained module (MLM head included)
    training_state/optimizer.safetensors              AdamW moments, per parameter index
    training_state/state.json                         step, eval round, optimizer param groups

A checkpoint is written under ``step_N.partial`` and renamed when complete, so a directory named
``step_N`` is always whole. Once a newer checkpoint is scored, an older one loses its
``training_state/`` (``drop_superseded_training_state``): only the latest is ever resumed from.
Everything is safetensors or JSON: nothing is unpickled on load.
Checkpoints live in the run directory (shared storage on a cluster) so evaluator actors on any
node read them, and a restarted worker group or a resumed search finds the latest one.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import torch
from safetensors.torch import load_file, load_model, save_file, save_model

STEP_PREFIX = "step_"


def trial_checkpoint_dir(run_dir: str, trial_id: str) -> Path:
    return Path(run_dir) / "trials" / trial_id / "checkpoints"


DIVERGED_FILE = "diverged.json"


def record_divergence(run_dir: str, trial_id: str, step: int, loss: float) -> None:
    """Note that a trial's loss stopped being finite, so the trial ends (and stays ended on resume)."""
    path = Path(run_dir) / "trials" / trial_id / DIVERGED_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"step": step, "loss": str(loss)}))


def divergence(run_dir: str, trial_id: str) -> str | None:
    """Why a trial diverged, if it did."""
    path = Path(run_dir) / "trials" / trial_id / DIVERGED_FILE
    if not path.exists():
        return None
    record = json.loads(path.read_text())
    return f"loss became {record['loss']} at step {record['step']}"


def latest_checkpoint(run_dir: str, trial_id: str) -> Path | None:
    return latest_step_dir(trial_checkpoint_dir(run_dir, trial_id))


def latest_step_dir(root: Path) -> Path | None:
    """The complete ``step_N`` checkpoint under ``root`` with the largest N, if any."""
    done = sorted(p for p in root.glob(f"{STEP_PREFIX}*") if p.is_dir() and not p.name.endswith(".partial"))
    return done[-1] if done else None


def save_checkpoint(
    target: Path,
    *,
    encoder: torch.nn.Module,
    full_model: torch.nn.Module,
    tokenizer,
    optimizer: torch.optim.Optimizer,
    record: dict,
    state: dict,
) -> Path:
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    encoder.save_pretrained(partial, safe_serialization=True)
    tokenizer.save_pretrained(partial)
    (partial / "doctune.json").write_text(json.dumps(record, indent=2, sort_keys=True))
    training = partial / "training_state"
    training.mkdir()
    save_model(full_model, str(training / "model.safetensors"))
    opt_state = optimizer.state_dict()
    tensors = {
        f"{index}.{name}": value.detach().cpu().contiguous()
        for index, slots in opt_state["state"].items()
        for name, value in slots.items()
        if torch.is_tensor(value)
    }
    save_file(tensors, str(training / "optimizer.safetensors"))
    state = {**state, "param_groups": opt_state["param_groups"]}
    (training / "state.json").write_text(json.dumps(state, indent=2))
    os.replace(partial, target)
    return target


def load_training_state(source: Path, full_model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict:
    """Restore module weights and optimizer moments in place; return the saved state dict."""
    training = source / "training_state"
    load_model(full_model, str(training / "model.safetensors"))
    state = json.loads((training / "state.json").read_text())
    tensors = load_file(str(training / "optimizer.safetensors"))
    per_param: dict[int, dict[str, torch.Tensor]] = {}
    for key, value in tensors.items():
        index, name = key.split(".", 1)
        per_param.setdefault(int(index), {})[name] = value
    optimizer.load_state_dict({"state": per_param, "param_groups": state["param_groups"]})
    return state


def drop_superseded_training_state(latest: Path) -> list[Path]:
    """Remove ``training_state/`` (three quarters of a checkpoint: the full module again and
    AdamW's two moments) from every checkpoint of the trial older than ``latest``: only the
    latest checkpoint can be resumed from. Call it once ``latest`` is scored, so a checkpoint
    deleted before scoring still leaves a resumable one behind. The weights, tokenizer, record
    and scores stay, so every round can still be exported and rescored. Returns what was removed."""
    removed = []
    for older in latest.parent.glob(f"{STEP_PREFIX}*"):
        state = older / "training_state"
        if older.name < latest.name and not older.name.endswith(".partial") and state.is_dir():
            shutil.rmtree(state)
            removed.append(state)
    return removed
