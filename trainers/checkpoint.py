"""Trial checkpoints: an ordinary model directory plus what training needs to resume.

Layout of ``<run_dir>/trials/<trial_id>/checkpoints/step_000040/``::

    config.json, model.safetensors, tokenizer files   the encoder (AutoModel loads it)
    doctune.json                                      recipe, hyperparameters, base model, corpus, step
    training_state/model.safetensors                  the full trained module (MLM head included)
    training_state/optimizer.safetensors              AdamW moments, per parameter index
    training_state/state.json                         step, eval round, optimizer param groups
    scores.json                                       the evaluators' scores
    report.json                                       the round's whole report to the search (its metrics)
    steps.json                                        each step's loss terms, views' cosines, gradient norm

Rank 0 saves a round to a staging directory on its own node (``staging_dir``: written under
``step_N.partial`` and renamed when whole), the evaluators score it from there (its files travel
through Ray's object store, ``doctune_core.model_files``), and its report to Ray Train carries it: Ray
Train persists it to the trial's storage (``trainers.trial``: the directory above, named
``step_N``) and the staged copy is deleted. So every ``step_N`` in storage was reported, with its
scores and report, and a resumed trial goes on from the latest one (``ray.train.get_checkpoint``);
a round saved but not yet reported when its trial was killed is trained again. A trial reaches
storage, and its records beside the checkpoints, only through the run's files (``doctune_core.run_files``,
``TrainPlan.run_files``), named relative to the run (``trial_path``). Once a newer round
is reported, an older one loses its ``training_state/`` (``drop_superseded_training_state``). Once
the trial has ended, ``release_finished_trial`` frees the rest the spec's ``train.keep_checkpoints``
does not keep (docs/decisions/checkpoints.md). Everything is safetensors or JSON: nothing is unpickled
on load.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

import torch
from safetensors.torch import load_file, load_model, save_file, save_model

from doctune_core.run_files import RunFiles
from doctune_core.run_layout import TRIALS_DIR

STEP_PREFIX = "step_"
RECORD_FILE = "doctune.json"
SCORES_FILE = "scores.json"  # the evaluators' scores, written into a checkpoint as its round is reported
REPORT_FILE = "report.json"  # the round's whole report to the search, written beside its scores
STEPS_FILE = "steps.json"  # each of the round's steps: its loss terms, views' cosines and gradient norm (rank 0's)
CHECKPOINTS = "checkpoints"  # the name of a trial's Ray Train run, under the trial's directory


def staging_dir(trial_id: str) -> Path:
    """Where rank 0 saves a trial's rounds on its own node until their reports persist them."""
    return Path(tempfile.gettempdir()) / "doctune-staged" / trial_id


def step_name(step: int) -> str:
    """A round's checkpoint directory name: ``step_000040``."""
    return f"{STEP_PREFIX}{step:06d}"


def recorded_checkpoint(recorded: str, trial_id: str) -> str:
    """The run-relative name (``trial_path``) of the checkpoint a report or record names by its path
    where it was written (``RunFiles.path``), so a run moved, or fetched from its storage, finds it
    in its own files."""
    return trial_path(trial_id, CHECKPOINTS, PurePosixPath(recorded).name)


DIVERGED_FILE = "diverged.json"


def trial_path(trial_id: str, *parts: str) -> str:
    """A path inside a trial's directory, relative to the run (``doctune_core.run_files``)."""
    return "/".join((TRIALS_DIR, trial_id, *parts))


def record_divergence(files: RunFiles, trial_id: str, step: int, loss: float) -> None:
    """Note that a trial's loss stopped being finite, so the trial ends (and stays ended on resume)."""
    files.write_json(trial_path(trial_id, DIVERGED_FILE), {"step": step, "loss": str(loss)})


def divergence(files: RunFiles, trial_id: str) -> str | None:
    """Why a trial diverged, if it did."""
    if not files.is_file(trial_path(trial_id, DIVERGED_FILE)):
        return None
    record = files.read_json(trial_path(trial_id, DIVERGED_FILE))
    return f"loss became {record['loss']} at step {record['step']}"


def step_dirs(root: Path) -> list[Path]:
    """The complete ``step_N`` checkpoints under ``root``, oldest first."""
    return sorted(p for p in root.glob(f"{STEP_PREFIX}*") if p.is_dir() and not p.name.endswith(".partial"))


def latest_step_dir(root: Path) -> Path | None:
    """The complete ``step_N`` checkpoint under ``root`` with the largest N, if any."""
    done = step_dirs(root)
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
    steps: list[dict] | None = None,
) -> Path:
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    encoder.save_pretrained(partial, safe_serialization=True)
    tokenizer.save_pretrained(partial)
    (partial / RECORD_FILE).write_text(json.dumps(record, indent=2, sort_keys=True))
    if steps is not None:
        (partial / STEPS_FILE).write_text(json.dumps(steps, indent=1))
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


def weights_digest(tensors: Mapping[str, torch.Tensor]) -> str:
    """SHA-256 over named tensors (in name order: each name, dtype, shape and bytes): two modules
    or files with equal digests hold equal weights."""
    digest = hashlib.sha256()
    for name in sorted(tensors):
        tensor = tensors[name].detach().cpu().contiguous()
        digest.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)}".encode())
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


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


def reported_rounds(files: RunFiles, trial_id: str) -> list[str]:
    """The trial's rounds in storage (``step_N`` names), oldest first: each was reported."""
    names = files.children(trial_path(trial_id, CHECKPOINTS))
    return [n for n in names if n.startswith(STEP_PREFIX) and not n.endswith(".partial")]


def drop_superseded_training_state(files: RunFiles, trial_id: str, latest: str) -> list[str]:
    """Remove ``training_state/`` (three quarters of a checkpoint: the full module again and
    AdamW's two moments) from every round of the trial older than ``latest`` (a ``step_N`` name):
    only the latest can be resumed from. Call it once ``latest`` is reported, so a round lost
    before its report still leaves a resumable one behind. The weights, tokenizer, record and
    scores stay, so every round can still be exported and rescored. Returns the rounds freed."""
    freed = []
    for older in (name for name in reported_rounds(files, trial_id) if name < latest):
        state = trial_path(trial_id, CHECKPOINTS, older, "training_state")
        if files.children(state):
            files.delete_dir(state)
            freed.append(older)
    return freed


def release_finished_trial(files: RunFiles, trial_id: str, keep_weights: str | None) -> int:
    """Free the checkpoints of a trial that has ended (completed or stopped early): nothing resumes
    from it, so every ``training_state/`` and any half-written ``step_N.partial`` goes; with
    ``keep_weights`` set (a ``step_N`` name), every other round keeps only its record, scores and
    report (the round's history for the report), so the trial's storage holds one model.
    ``keep_weights=None`` keeps every round's weights. Returns the bytes freed."""
    checkpoints = trial_path(trial_id, CHECKPOINTS)
    sizes = files.listing(checkpoints)
    freed = 0

    def remove(relative: str) -> None:  # a file or a directory, relative to the checkpoints
        nonlocal freed
        freed += sum(size for path, size in sizes.items() if path == relative or path.startswith(f"{relative}/"))
        if relative in sizes:
            files.delete_file(f"{checkpoints}/{relative}")
        else:
            files.delete_dir(f"{checkpoints}/{relative}")

    for name in files.children(checkpoints):
        if name.startswith(STEP_PREFIX) and name.endswith(".partial"):
            remove(name)
    for name in reported_rounds(files, trial_id):
        remove(f"{name}/training_state")
        if keep_weights is not None and name != keep_weights:
            for entry in files.children(f"{checkpoints}/{name}"):
                if entry not in (RECORD_FILE, SCORES_FILE, REPORT_FILE, STEPS_FILE):
                    remove(f"{name}/{entry}")
    return freed
