"""What a finished search establishes about its winner, once validation has chosen it: its locked
test part read once, the report-only tasks for the best trials, its gains over the baseline and
reference rows (paired on the same test items), and whether the ranking is beyond noise
(``platform.results.ranking``). Each step that fails (a checkpoint gone) says so in the row's status: the
leaderboard, ``best/`` and the report still follow."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable

from doctune_core.logs import progress
from platform.results import ranking

log = logging.getLogger(f"doctune.{__name__}")

REPORT_TOP_TRIALS = 3  # trials scored on the report-only tasks, beside the baseline
CONFIRM_SUFFIX = "-confirm"  # the confirmation's Tune run: the search's name and this

# Trains a configuration (the searched hyperparameters) once per seed as one Tune run of the given
# name and returns its results (``platform.search_path.tuner.train_seeds``, bound to the search).
Retrain = Callable[[dict, list[int], str], object]


class ItemOutcomes:
    """Rows' item-level outcomes on the ranking objective's tasks, per part, fetched from the
    evaluator pool once each (``evaluators.pool_calls.checkpoint_outcomes``: cached embeddings, no
    encoder run twice)."""

    def __init__(self, resolved) -> None:
        self.evaluation, self.files = resolved.evaluation, resolved.train_plan.run_files
        self.weights = next(iter(self.evaluation.objectives.values()))  # the ranking objective
        self._seen: dict[tuple[str, str], dict] = {}

    def __call__(self, row, split: str) -> dict:
        from evaluators.pool_calls import checkpoint_outcomes, stored_model

        key = (row.checkpoint, split)
        if key not in self._seen:
            model, pooling = stored_model(self.files, row.checkpoint), row.hyperparameters["pooling"]
            self._seen[key] = checkpoint_outcomes(self.evaluation, model, pooling, list(self.weights), split)
        return self._seen[key]


def long_task_weights(weights: dict[str, float]) -> dict[str, float]:
    """The objective's long-document tasks (``TaskMetadata.long_documents``) with their weights."""
    from evaluators.tasks import task_class

    return {task: w for task, w in weights.items() if task_class(task).metadata.long_documents}


def compare_with_baselines(best, baselines, outcomes: ItemOutcomes) -> None:
    """Set ``best.gains``: the winner's test objective against each baseline row's, paired over the
    same test items (``doctune_core.noise.paired_gain``), so the leaderboard says whether the gain is
    beyond noise; and ``best.long_task_gains``, the same on the objective's long-document tasks
    pooled with their objective weights. Where ``search.confirm_seeds`` kept two or more runs, each
    gain is those runs' mean (``doctune_core.noise.seed_mean_gain``): the configuration's, with the
    seeds' spread measured, and free of the winner's own run, chosen for its score (``configuration_gain``)."""
    from evaluators.pool_calls import CheckpointMissing

    long_weights = long_task_weights(outcomes.weights)
    runs = confirmation_rows(best)
    log.info(f"doctune: comparing {best.trial} with the baseline rows on the test items (paired)")
    try:
        for baseline in baselines:
            best.gains[baseline.trial] = configuration_gain(best, runs, baseline, outcomes, outcomes.weights)
            if long_weights and long_weights != outcomes.weights:
                best.long_task_gains[baseline.trial] = configuration_gain(best, runs, baseline, outcomes, long_weights)
    except (CheckpointMissing, RuntimeError) as err:  # the leaderboard, best/ and the report still follow
        best.status += f"; not compared with the baselines: {err}"


def confirmation_rows(best) -> list:
    """The winner's configuration retrained by ``search.confirm_seeds``, each run that kept its
    checkpoint as a row like the winner's (its own scores and checkpoint)."""
    return [
        dataclasses.replace(best, trial=run["trial"], checkpoint=run["checkpoint"], scores=run["scores"])
        for run in (best.confirmation or {}).get("seeds", {}).values()
        if run.get("checkpoint")
    ]


def configuration_gain(best, runs: list, baseline, outcomes: ItemOutcomes, weights: dict[str, float]) -> dict:
    """The gain record of ``best``'s configuration over ``baseline`` on ``weights``' tasks' test
    items: the mean of the confirmation ``runs``' paired gains where there are two or more, else the
    winner's own run's, with the confirmation's seed spread where it was measured."""
    from doctune_core.noise import paired_gain, seed_mean_gain

    theirs = outcomes(baseline, "test")
    if len(runs) >= 2:
        return seed_mean_gain([paired_gain(outcomes(run, "test"), theirs, weights) for run in runs])
    return paired_gain(outcomes(best, "test"), theirs, weights, ranking.seed_spread(best, weights))


def compare_per_task(best, baselines, resolved) -> None:
    """Set ``best.task_gains``: the winner against each baseline and reference row on every task both
    scored (the objective's and the report-only ones), test items paired by id, and on a retrieval task
    per length bucket of the documents to find; each with the training seeds' spread of its score
    where ``search.confirm_seeds`` measured it (the objective's tasks: a report-only task's test part
    is not scored for the extra seeds)."""
    from doctune_core.noise import task_gain
    from evaluators.pool_calls import CheckpointMissing, checkpoint_outcomes, reference_outcomes, stored_model
    from platform.results.baselines import search_references

    evaluation, files = resolved.evaluation, resolved.train_plan.run_files
    tasks = [t for t in (*evaluation.tasks, *evaluation.report_tasks) if t in best.scores]
    log.info(
        f"doctune: comparing {best.trial} with the baseline and reference rows, task by task (test items)",
    )
    try:
        mine = checkpoint_outcomes(
            evaluation, stored_model(files, best.checkpoint), best.hyperparameters["pooling"], tasks
        )
        against = {
            b.trial: checkpoint_outcomes(evaluation, b.checkpoint, b.hyperparameters["pooling"], tasks)
            for b in baselines
        }
        for reference in search_references(resolved) if evaluation.references else ():
            pooling = reference.pooling or resolved.fixed.pooling
            against[reference.id] = reference_outcomes(evaluation, reference, pooling, tasks)
    except (CheckpointMissing, RuntimeError) as err:  # the leaderboard, best/ and the report still follow
        best.status += f"; not compared task by task: {err}"
        return
    seeds = {
        task: {
            label: spread
            for label in ("main", *mine[task].strata)
            if (spread := ranking.seed_spread(best, {task: 1.0}, label=label)) is not None
        }
        for task in tasks
    }
    for row, outcomes in against.items():
        best.task_gains[row] = {
            task: task_gain(mine[task], outcomes[task], task, seeds[task]) for task in tasks if task in outcomes
        }


def measure_start_drift(trials, baselines, resolved) -> None:
    """Set each trial row's ``start_cosine``: how far training moved its embeddings of the short tasks'
    validation texts from its untrained start's (the converted base, with the trial's own
    ``position_init``; the base where nothing was converted). Reported only: validation texts, no test
    part, nothing chosen by it."""
    from evaluators.leaderboard import BASELINE_ID, CONVERTED_BASELINE_ID, INTERPOLATED_BASELINE_ID
    from evaluators.pool_calls import CheckpointMissing, checkpoint_start_cosine, stored_model

    evaluation = resolved.evaluation
    by_id = {b.trial: b for b in baselines}
    log.info(f"doctune: measuring how far {len(trials)} trials moved short validation texts from their start")
    for row in trials:
        interpolated = row.hyperparameters.get("position_init") == "interpolate"
        start = by_id.get(INTERPOLATED_BASELINE_ID if interpolated else CONVERTED_BASELINE_ID) or by_id.get(BASELINE_ID)
        if start is None or not start.checkpoint or not row.checkpoint:
            continue
        tasks = [t for t in (*evaluation.tasks, *evaluation.report_tasks) if t in row.scores]
        model = stored_model(resolved.train_plan.run_files, row.checkpoint)
        try:
            row.start_cosine = checkpoint_start_cosine(
                evaluation, model, start.checkpoint, row.hyperparameters["pooling"], tasks
            )
        except (CheckpointMissing, RuntimeError) as err:  # reported only: the leaderboard still follows
            row.status += f"; its drift from the start not measured: {err}"


def assess_ranking(rows, baselines, outcomes: ItemOutcomes) -> ranking.RankingNoise | None:
    """Whether the trials, and the winner against the runner-up and the baselines, differ beyond
    the validation scores' noise (``platform.results.ranking``); None, with the reason printed, when a
    checkpoint it needs is gone."""
    from evaluators.leaderboard import is_baseline
    from evaluators.pool_calls import CheckpointMissing
    from evaluators.references import winner

    trials = [r for r in rows if not is_baseline(r) and r.objective is not None and r.checkpoint]
    log.info(f"doctune: measuring the noise of the ranking ({len(trials)} trials, validation items)")
    try:
        return ranking.assess(
            trials,
            baselines,
            lambda row: outcomes(row, ranking.RANKING_PART),
            outcomes.weights,
            ranking.seed_spread(winner(rows), outcomes.weights, ranking.RANKING_PART),
        )
    except (CheckpointMissing, RuntimeError) as err:  # the leaderboard, best/ and the report still follow
        log.warning(f"doctune: the ranking's noise not measured: {err}")
        return None


def _ranked_trials(scored) -> list:
    """The scored trials, best validation objective first (the leaderboard's order: the first is the winner)."""
    return sorted(scored, key=lambda r: r.objective, reverse=True)


def read_locked_part_of_winner(scored, resolved) -> None:
    """The winner's test objective: its locked test part, read once, now that validation has chosen
    it (``read_locked_part``). The other trials' test parts are never read."""
    from evaluators.pool_calls import CheckpointMissing

    best = _ranked_trials(scored)[0]
    log.info(f"doctune: scoring {best.trial}, the winner on validation, on the locked test part")
    try:
        read_locked_part(resolved, best)
    except (CheckpointMissing, RuntimeError) as err:  # the leaderboard, best/ and the report still follow
        best.status += f"; test part not scored: {err}"


def record_search_reading(resolved, rows, best) -> dict:
    """The search's reading of its locked test parts (the winner's, the baselines' and the references')
    entered in the ledger (``evaluators.readings``): its ``ReadingCount`` record, which every test
    verdict of the search carries (``Row.locked_reading``)."""
    from evaluators.readings import locked_parts, record_reading

    parts = {task: digest for row in rows for task, digest in locked_parts(row.scores).items()}
    what = f"search {resolved.search.name!r} ({resolved.profile}): winner {best.trial}, baselines and references"
    return record_reading(parts, what, resolved.run_dir)


def score_report_tasks(scored, resolved) -> None:
    """Score the best trials on the tasks that never steered the search (the baseline already
    has them), so the report shows whether the winners generalise beyond their objective: the
    winner on both parts, the runners-up on validation only; a length grid (``@grid``), the
    costliest, for the winner alone."""
    from evaluators.pool_calls import CheckpointMissing, score_checkpoint, stored_model
    from evaluators.tasks import GRID

    evaluation = resolved.evaluation
    log.info(f"doctune: scoring the top {REPORT_TOP_TRIALS} trials on the report-only tasks")
    top = _ranked_trials(scored)[:REPORT_TOP_TRIALS]
    for place, row in progress(enumerate(top), len(top), "report-only tasks", unit="trial"):
        tasks = [t for t in evaluation.report_tasks if place == 0 or not t.endswith(GRID)]
        if not tasks:
            continue
        plan = evaluation if place == 0 else dataclasses.replace(evaluation, parts=("val",))
        try:
            model = stored_model(resolved.train_plan.run_files, row.checkpoint)
            row.scores |= score_checkpoint(plan, model, row.hyperparameters["pooling"], tasks)
        except CheckpointMissing as err:
            row.status += f"; report-only tasks not scored: {err}"


def read_locked_part(resolved, row) -> None:
    """Score ``row``'s chosen checkpoint on the objective's test parts and set its ``test_objective``.
    A search's rounds read validation only, so a trial's locked test part is read here, once the
    search has chosen, for the rows it reports (the winner and its confirmation runs)."""
    from evaluators.pool_calls import score_checkpoint, stored_model
    from evaluators.scores import main_scores

    evaluation = dataclasses.replace(resolved.evaluation, parts=("test",))
    model = stored_model(resolved.train_plan.run_files, row.checkpoint)
    scores = score_checkpoint(evaluation, model, row.hyperparameters["pooling"], list(evaluation.tasks))
    for task, parts in scores.items():
        row.scores.setdefault(task, {}).update(parts)
    row.test_objective = evaluation.objective_of(main_scores(row.scores, "test"))


def confirm_winner(resolved, winner, retrain: Retrain) -> dict:
    """``search.confirm_seeds``: the winner's configuration trained again (``retrain``) with that
    many more training seeds (``train.seed`` + 1, + 2, ...), each run chosen and reported like a
    trial (best round by the validation objective, test scores reported). Returns the record the
    leaderboard keeps (``confirmation_record``): mean ± sample std over the new seeds only, the
    winner's own run apart. An interrupted confirmation continues on ``--resume``."""
    from evaluators.readings import locked_parts, record_reading
    from platform.results.leaderboard import confirmation_record, rows_from_results

    search = resolved.search
    seeds = [resolved.train_plan.seed + i for i in range(1, search.confirm_seeds + 1)]
    config = {name: winner.hyperparameters[name] for name in search.space if name in winner.hyperparameters}
    log.info(f"doctune: confirming {winner.trial} with {len(seeds)} more training seed(s): {seeds}")
    results = retrain(config, seeds, f"{search.name}{CONFIRM_SUFFIX}")
    runs = {}
    for result, row in zip(results, rows_from_results(results, resolved)):
        if row.checkpoint is not None:
            read_locked_part(resolved, row)
            seed = int(result.config["seed"])
            what = f"search {search.name!r}: confirmation seed {seed}"
            record_reading(locked_parts(row.scores), what, resolved.run_dir)
            runs[seed] = row
    return confirmation_record(winner, resolved.train_plan.seed, runs, len(seeds))
