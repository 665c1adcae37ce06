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
from evaluators.scores import main_scores
from trainers.checkpoint import CHECKPOINTS, SCORES_FILE, release_finished_trial, reported_rounds, trial_path

RELEASED_FILE = "released.json"
ENDED = "TERMINATED"  # Tune's status for a trial that completed or was stopped by the scheduler


def chosen_checkpoint(files: RunFiles, trial_id: str, evaluation) -> str | None:
    """The round (a ``step_N`` name) an ended trial's row shows, from its scored rounds in the run's
    files, by the rule ``platform.results.leaderboard.rows_from_results`` applies to its reports: one
    objective, the round with the best validation objective (the earliest on a tie); several, the
    last round. None when nothing was scored."""
    scores = {name: trial_path(trial_id, CHECKPOINTS, name, SCORES_FILE) for name in reported_rounds(files, trial_id)}
    scored = [name for name, path in scores.items() if files.is_file(path)]
    if not scored or evaluation.multi_objective:
        return scored[-1] if scored else None
    objectives = [
        evaluation.reported_objectives(main_scores(files.read_json(scores[name]), "val"))["objective"]
        for name in scored
    ]
    return scored[objectives.index(max(objectives))]


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
