"""What an ended trial keeps on disk (``train.keep_checkpoints``; docs/decisions/checkpoints.md).

A checkpoint is the encoder's weights plus about three times as much training state (the full
module again and AdamW's two moments). While a trial runs, only its latest checkpoint keeps that
state (``trainers.checkpoint.drop_superseded_training_state``). Once it has ended, completed or
stopped by ASHA, nothing resumes from it: ``ReleaseEndedTrials`` frees its training state and, under
``keep_checkpoints: best``, the weights of every round but the one its leaderboard row shows, as
soon as Tune marks it ended; ``release_ended_trials`` sweeps every ended trial once more when the
search (or its resume) is over, for anything a stopped trial's workers wrote after that. A trial
that errored keeps everything: ``--resume`` may retry it from its last checkpoint.
"""

from __future__ import annotations

from ray import tune

from doctune_core.run_files import RunFiles
from evaluators.plan import EvalPlan
from platform.results.leaderboard import chosen_checkpoint
from trainers.checkpoint import release_finished_trial, trial_path

RELEASED_FILE = "released.json"
ENDED = "TERMINATED"  # Tune's status for a trial that completed or was stopped by the scheduler


def release(files: RunFiles, trial_id: str, evaluation: EvalPlan, keep: str) -> int:
    """Free one ended trial's checkpoints under the policy ``keep``; the bytes freed, also added up
    in the trial's ``released.json`` (what the policy removed, for the user and bench/)."""
    chosen = chosen_checkpoint(files, trial_id, evaluation)
    if keep == "best" and chosen is None:  # never scored: no row can show it, and nothing to choose by
        return 0
    freed = release_finished_trial(files, trial_id, keep_weights=chosen if keep == "best" else None)
    if freed:
        record = trial_path(trial_id, RELEASED_FILE)
        before = files.read_json(record)["bytes"] if files.is_file(record) else 0
        files.write_json(record, {"policy": keep, "bytes": before + freed, "weights_kept": chosen})
    return freed


class ReleaseEndedTrials(tune.Callback):
    """Frees each trial's checkpoints as soon as it ends (completed or stopped early)."""

    def __init__(self, files: RunFiles, evaluation: EvalPlan, keep: str) -> None:
        self.files, self.evaluation, self.keep = files, evaluation, keep

    def on_trial_complete(self, iteration: int, trials: list, trial, **info) -> None:
        release(self.files, trial.trial_id, self.evaluation, self.keep)


def release_ended_trials(results, files: RunFiles, evaluation: EvalPlan, keep: str) -> int:
    """The sweep at the end of a search over every trial Tune holds as ended; the bytes freed."""
    trials = results._experiment_analysis.trials
    return sum(release(files, t.trial_id, evaluation, keep) for t in trials if t.status == ENDED)
