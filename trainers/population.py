"""Population Based Training, the trial's side: each round reaches Tune with a checkpoint, and a
trial that PBT restarts from another trial's checkpoint continues from it.

Ray 2.60's Train-in-Tune (``TuneReportCallback``) forwards a Train report's metrics and only the
*path* of its checkpoint, so a Tune trial running a ``TorchTrainer`` never holds a Tune checkpoint
and PBT has nothing to exploit. Under PBT the Train run's reports go onto a queue instead
(``ReportsToQueue``); the trial function runs ``fit`` in a thread and reports each round to Tune
itself (``fit_reporting_to_tune``) with a pointer checkpoint: a small directory naming the round's
doctune checkpoint in the run's files (``doctune_core.run_files``), which every node reaches, rather than a
copy of its weights.

PBT runs synchronously here (every trial reaches the perturbation round before any exploits), so a
donor and its receiver stand at the same step. PBT restarts a bottom trial with a top trial's
pointer (``tune.get_checkpoint()``) and the donor's configuration perturbed. The restarted trial
records the exploit in ``trials/<id>/exploits.json`` (``continue_from_donor``: round, step, donor,
donor checkpoint, the configuration it goes on with) and continues from the donor's checkpoint:
weights, MLM and Bregman heads, AdamW moments and stream position (``resume_point``), recording
the digest of the weights it loaded. Its own rounds up to the exploit stay its history (a round
it trained past the pause was staged, never reported, and is dropped as it restarts). A trial
restarted with its own pointer (a pause, a retry) resumes from its own latest checkpoint, as any
resumed trial does. Every checkpoint keeps its training state until the search ends
(``TrainPlan.population``), since a trial may continue from any reported round.
"""

from __future__ import annotations

import json
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path, PurePosixPath

import torch

from doctune_core.run_files import RunFiles
from trainers.checkpoint import CHECKPOINTS, RECORD_FILE, trial_path, weights_digest

POINTER_FILE = "doctune_checkpoint.json"  # inside a reported Tune checkpoint: which round it stands for
EXPLOITS_FILE = "exploits.json"  # per trial: each time it continued from another trial's checkpoint


def exploits(files: RunFiles, trial_id: str) -> list[dict]:
    """The trial's exploits, oldest first (empty for a trial that never continued from another)."""
    path = trial_path(trial_id, EXPLOITS_FILE)
    return files.read_json(path) if files.is_file(path) else []


def continue_from_donor(files: RunFiles, trial_id: str, config: dict) -> dict | None:
    """Called as the trial starts: if Tune restarted it with another trial's checkpoint (a PBT
    exploit not yet recorded), record the exploit; returns the new record, else None."""
    from ray import tune

    checkpoint = tune.get_checkpoint()
    if checkpoint is None:
        return None
    with checkpoint.as_directory() as directory:
        pointer = json.loads((Path(directory) / POINTER_FILE).read_text())
    if pointer["trial"] == trial_id:
        return None  # its own round: a pause or a retry, resumed from its own latest checkpoint
    records = exploits(files, trial_id)
    if records and records[-1]["donor_checkpoint"] == pointer["checkpoint"]:
        return None  # recorded already: the trial was restarted again before its next report
    record = {
        "round": pointer["eval_round"],
        "step": pointer["step"],
        "donor": pointer["trial"],
        "donor_checkpoint": pointer["checkpoint"],
        "hyperparameters": dict(config),
    }
    files.write_json(trial_path(trial_id, EXPLOITS_FILE), [*records, record])
    return record


def resume_point(files: RunFiles, trial_id: str, own: str | None) -> tuple[str | None, bool]:
    """Where the trial goes on from (a checkpoint's path in the run) and whether that is a donor's:
    its last exploit's donor checkpoint until the trial has reported one of its own past it, else
    ``own``, its latest reported checkpoint (``ray.train.get_checkpoint``), if any. A recorded donor
    checkpoint is found by its round's name in the donor's directory, wherever the run is now."""
    records = exploits(files, trial_id)
    if records and (own is None or files.read_json(f"{own}/{RECORD_FILE}")["step"] <= records[-1]["step"]):
        donor = records[-1]
        return trial_path(donor["donor"], CHECKPOINTS, PurePosixPath(donor["donor_checkpoint"]).name), True
    return own, False


def record_loaded_weights(files: RunFiles, trial_id: str, encoder: torch.nn.Module, donor: Path) -> str:
    """The digest of the encoder weights the trial loaded from ``donor`` (a local copy of the donor's
    checkpoint; over the tensors of its saved encoder, which outlive its training state), written
    into the trial's last exploit record; returns it."""
    from safetensors import safe_open

    names = set()
    for path in sorted(donor.glob("model*.safetensors")):
        with safe_open(str(path), framework="pt") as saved:
            names |= set(saved.keys())
    digest = weights_digest({k: v for k, v in encoder.state_dict().items() if k in names})
    records = exploits(files, trial_id)
    records[-1]["weights_sha256"] = digest
    files.write_json(trial_path(trial_id, EXPLOITS_FILE), records)
    return digest


def _reports_to_queue_class():
    from ray.train.v2.api.callback import UserCallback

    class ReportsToQueue(UserCallback):
        """Each Train report's metrics (rank 0's) onto a queue the trial function reads."""

        def __init__(self, queue) -> None:
            self.queue = queue

        def after_report(self, run_context, metrics: list[dict], checkpoint) -> None:
            self.queue.put(dict(metrics[0]))

    return ReportsToQueue


def fit_reporting_to_tune(trial_id: str, build: Callable[[list], object]) -> None:
    """Run ``build(callbacks).fit()`` in a thread and report each of its rounds to Tune from this
    one, with a pointer checkpoint to the round's doctune checkpoint. ``fit``'s error is raised here."""
    from ray import tune
    from ray.util.queue import Queue

    queue = Queue(actor_options={"num_cpus": 0})
    trainer = build([_reports_to_queue_class()(queue)])
    failure: list[BaseException] = []

    def fit() -> None:
        try:
            trainer.fit()
        except BaseException as err:  # raised again in the trial's own thread
            failure.append(err)
        finally:
            queue.put(None)

    thread = threading.Thread(target=fit, name=f"fit-{trial_id}", daemon=True)
    thread.start()
    while (metrics := queue.get()) is not None:
        with tempfile.TemporaryDirectory(prefix="doctune-pointer-") as directory:
            pointer = {
                "trial": trial_id,
                "checkpoint": metrics["checkpoint"],
                "step": int(metrics["step"]),
                "eval_round": int(metrics["eval_round"]),
            }
            (Path(directory) / POINTER_FILE).write_text(json.dumps(pointer))
            tune.report(metrics, checkpoint=tune.Checkpoint.from_directory(directory))
    thread.join()
    queue.shutdown()
    if failure:
        raise failure[0]
