"""The Tune wiring: from a resolved search to finished trials.

From a ``ResolvedSearch`` (``platform.resolution``), never the spec: ``run_search`` scores the base
model and runs the search's strategy (``platform.strategies``: Optuna + ASHA, Optuna alone, PBT)
over Ray Train trials with the evaluator pool up (``evaluator_pool``);
``train_seeds`` trains one configuration with several seeds (``confirm_winner``: the winner's, with
more seeds; the recipe study's rows).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from collections.abc import Sequence
from contextlib import contextmanager

from core.logs import progress, tells_progress
from core.run_files import RunFiles
from platform.plans import ResolvedSearch
from platform.run_dir import TUNE_DIR
from platform.timings import PhaseClock

log = logging.getLogger(f"doctune.{__name__}")


def tune_verbosity() -> int | None:
    """Tune's console output: its own default where doctune's progress is shown, silent otherwise
    (a search called from Python with logging at WARNING prints nothing; see
    ``libraries_quiet_unless_told``)."""
    return None if tells_progress() else 0


@contextmanager
def libraries_quiet_unless_told():
    """A Tune run's making and fitting, its console output as doctune's progress says. Quiet, two
    libraries need more than Tune's verbosity (``tune_verbosity``): Tune's new output engine prints an
    experiment's start (its configuration, where its results are) at every verbosity, 0 included,
    while its legacy engine prints nothing at 0, so a quiet run uses the legacy one
    (``RAY_AIR_NEW_OUTPUT=0``, read as the run starts); Optuna logs its study's creation (when the
    searcher is made) at INFO through a handler of its own, so its verbosity is WARNING. Both are put
    back after the block."""
    if tells_progress():
        yield
        return
    import optuna

    before = os.environ.get("RAY_AIR_NEW_OUTPUT"), optuna.logging.get_verbosity()
    os.environ["RAY_AIR_NEW_OUTPUT"] = "0"
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        yield
    finally:
        if before[0] is None:
            os.environ.pop("RAY_AIR_NEW_OUTPUT")
        else:
            os.environ["RAY_AIR_NEW_OUTPUT"] = before[0]
        optuna.logging.set_verbosity(before[1])


def _trainable(resolved: ResolvedSearch):
    """Tune's trainable for the search's trials: ``trainers.trial.run_trial`` with the plan and the
    fixed hyperparameters, its trial actor at a token CPU (the Train workers hold the real ones)."""
    from ray import tune

    from trainers.trial import run_trial

    return tune.with_resources(
        tune.with_parameters(run_trial, plan=resolved.train_plan, fixed=dataclasses.asdict(resolved.fixed)),
        {"cpu": 0.01},
    )


def tune_setup(resolved: ResolvedSearch, callbacks: Sequence = ()):
    """The Tune run of a new search, from its plan: the parameter space Tune samples (None where the
    strategy's searcher draws), the ``TuneConfig`` (the strategy's searcher and scheduler, as many
    trials at once as the resource plan allows) and the ``RunConfig`` (the run's files, the
    strategy's stop condition, retries, every Tune run's callbacks and ``callbacks``)."""
    from ray import tune

    search, files = resolved.search, resolved.train_plan.run_files
    parts = search.strategy.tune_parts(resolved.run_dir)
    tune_config = tune.TuneConfig(
        search_alg=parts.search_alg,
        scheduler=parts.scheduler,
        num_samples=search.samples,
        max_concurrent_trials=resolved.resources.max_concurrent,
        # not reused, on purpose: a trial run in a reused actor could train to its end with its
        # reports never reaching Tune, which hung the search
        reuse_actors=False,
    )
    run_config = tune.RunConfig(
        name=search.name,
        storage_path=files.path(TUNE_DIR),
        storage_filesystem=tune_filesystem(files),
        stop=parts.stop,
        # a restarted trial goes on from its latest checkpoint (trainers/loop.py); a diverged one
        # errors again at once (its divergence is recorded), so retries never retrain it
        failure_config=tune.FailureConfig(max_failures=search.max_trial_failures),
        callbacks=_callbacks(resolved, callbacks),
        verbose=tune_verbosity(),
    )
    return parts.param_space, tune_config, run_config


def _tuner(resolved: ResolvedSearch, resume: bool, callbacks: Sequence = ()):
    """The search's Tune run: restored from the run's files on ``--resume`` where Tune saved one."""
    from ray import tune

    files = resolved.train_plan.run_files
    experiment = f"{TUNE_DIR}/{resolved.search.name}"
    if resume and files.is_file(f"{experiment}/tuner.pkl"):
        return tune.Tuner.restore(
            files.path(experiment),
            trainable=_trainable(resolved),
            resume_unfinished=True,
            resume_errored=True,
            storage_filesystem=tune_filesystem(files),
        )
    param_space, tune_config, run_config = tune_setup(resolved, callbacks)
    return tune.Tuner(_trainable(resolved), param_space=param_space, tune_config=tune_config, run_config=run_config)


def tune_filesystem(files: RunFiles):
    """The file system Tune and Train write the run's files through: None (their own choice, a local
    path) where the run is on this machine's disk, else the run's (an S3-compatible server's
    endpoint travels in it, which a URI string given to Tune would lose)."""
    return None if files.local else files.filesystem


def _callbacks(resolved: ResolvedSearch, more: Sequence = ()) -> list:
    """Every Tune run's callbacks: ended trials' checkpoints released (not under PBT: a trial may go
    on from any round of another until the search ends), TensorBoard without the per-round test
    scores (``platform.tracking``), every round to the calling code's listeners
    (``platform.listeners``), ``more`` (the trackers'), and last the driver's records uploaded to
    the run's storage (``platform.records``), so that they hold what the others recorded."""
    from platform.listeners import TrialListeners
    from platform.records import UploadRecords
    from platform.tracking import ValidationOnlyTensorBoard

    released = [] if resolved.search.strategy.population else [_release_callback(resolved)]
    return [*released, ValidationOnlyTensorBoard(), TrialListeners(), *more, UploadRecords()]


def _release_callback(resolved: ResolvedSearch):
    from platform.retention import ReleaseEndedTrials

    return ReleaseEndedTrials(resolved.train_plan.run_files, resolved.evaluation, resolved.search.keep_checkpoints)


def _release_ended(results, resolved: ResolvedSearch) -> None:
    from platform.retention import release_ended_trials

    keep = resolved.search.keep_checkpoints
    freed = release_ended_trials(results, resolved.train_plan.run_files, resolved.evaluation, keep)
    if freed:
        log.info(f"doctune: ended trials' checkpoints released ({freed / 1e6:.0f} MB; train.keep_checkpoints: {keep})")


def baseline_models(resolved: ResolvedSearch) -> dict[str, tuple[str, str]]:
    """The leaderboard's baseline rows, id -> (model directory, status): the base encoder as the
    spec names it and, where the spec converts it (a Longformer backbone), the converted encoder
    before any training, so a user sees whether the whole pipeline, conversion included, helped;
    where some trial starts from interpolated positions, that start too, untrained (what such a
    trial's gain from training is measured against)."""
    from core.longformer import cached_interpolated
    from platform.leaderboard import BASELINE_ID, CONVERTED_BASELINE_ID, INTERPOLATED_BASELINE_ID

    rows = {BASELINE_ID: (resolved.source_model, "base model, untouched")}
    converted = resolved.train_plan.base_model
    if resolved.source_model != converted:
        rows[CONVERTED_BASELINE_ID] = (converted, "base model converted to the backbone, untrained")
    if resolved.inputs.interpolates:
        interpolated = str(cached_interpolated(resolved.train_plan.base_model))
        rows[INTERPOLATED_BASELINE_ID] = (interpolated, "base model converted, positions interpolated, untrained")
    return rows


def score_baselines(resolved: ResolvedSearch) -> dict[str, dict]:
    """Each baseline row's model, status and scores on every task (``baseline.json``)."""
    from evaluators.pool import score_checkpoint

    evaluation = resolved.evaluation
    tasks = [*evaluation.tasks, *evaluation.report_tasks]
    models = baseline_models(resolved)
    return {
        row: {
            "model": model,
            "status": status,
            "scores": score_checkpoint(evaluation, model, resolved.fixed.pooling, tasks),
        }
        for row, (model, status) in progress(models.items(), len(models), "baseline rows")
    }


REFERENCES_RECORD = "references.json"


def search_references(resolved: ResolvedSearch) -> tuple:
    """The reference rows of a search (``evaluators.references``): the base as the spec names it,
    as its users run it (the packaged or Hub model itself, not a copy given an MLM head or converted)."""
    from core.encoder import resolve_model
    from evaluators.references import references

    return references(resolve_model(resolved.train_plan.base_model_name))


def score_references(resolved: ResolvedSearch) -> dict[str, dict]:
    """What a user already has (``search_references``: BM25, the base as its users run it), each
    row's description, model, reading and scores on every task. Never steers anything."""
    from evaluators.pool import score_reference

    evaluation = resolved.evaluation
    tasks = [*evaluation.tasks, *evaluation.report_tasks]
    rows = search_references(resolved)
    return {
        reference.id: {
            "description": reference.description,
            "model": reference.model,
            "reading": dataclasses.asdict(reference.reading),
            "scores": score_reference(evaluation, reference, reference.pooling or resolved.fixed.pooling, tasks),
        }
        for reference in progress(rows, len(rows), "reference rows")
    }


def reference_record(resolved: ResolvedSearch, clock: PhaseClock) -> dict[str, dict]:
    """The reference rows' record (``references.json``): scored once per run, read back on a resume."""
    record_file = resolved.run_dir / REFERENCES_RECORD
    if record_file.exists():
        return json.loads(record_file.read_text())
    log.info("doctune: scoring the reference rows (BM25, the base as its users run it)")
    with clock.phase("references"):
        record = score_references(resolved)
    record_file.write_text(json.dumps(record, indent=2))
    return record


def evaluator_pool(resolved: ResolvedSearch):
    """The search's evaluator actors (``evaluators.pool.EvaluatorPool``), alive for a ``with`` block."""
    from evaluators.pool import EvaluatorPool

    search = resolved.search
    log.info(f"doctune: starting {search.evaluators} evaluator(s) (loading task data)")
    return EvaluatorPool(
        resolved.evaluation,
        str(resolved.run_dir.resolve()),
        search.cpus_per_evaluator,
        search.gpus_per_evaluator,
        run_root=resolved.train_plan.run_files.root,
    )


def run_search(resolved: ResolvedSearch, resume: bool, clock: PhaseClock | None = None, callbacks: Sequence = ()):
    """Score the baseline encoders, then run the trials (``callbacks``: more Tune callbacks, such as
    the trackers'). Returns (baselines, Tune results); raises KeyboardInterrupt when the trials were interrupted."""
    clock = clock or PhaseClock()
    baseline_file = resolved.run_dir / "baseline.json"
    if baseline_file.exists():
        baseline = json.loads(baseline_file.read_text())
    else:
        log.info("doctune: scoring the base model (the leaderboard's baseline rows)")
        with clock.phase("baseline"):
            baseline = score_baselines(resolved)
        baseline_file.write_text(json.dumps(baseline, indent=2))
    search = resolved.search
    log.info(f"doctune: {search.samples} trial(s), {resolved.resources.describe()}")
    if line := search.strategy.describe():
        log.info(f"doctune: {line}")
    if warning := search.strategy.warning():
        log.warning(f"doctune: warning: {warning}")
    with clock.phase("trials"):
        with libraries_quiet_unless_told():
            results = _tuner(resolved, resume, callbacks).fit()
    if not finished(results, search.samples, resolved.train_plan.run_files):
        raise KeyboardInterrupt  # Ctrl-C: Tune saved the experiment; the caller says how to continue it
    _release_ended(results, resolved)
    if note := search.strategy.after_search(resolved.run_dir):
        log.info(f"doctune: {note}")
    return baseline, results


def finished(results, trials: int, files: RunFiles) -> bool:
    """Whether all ``trials`` of a Tune run ended (completed, stopped or errored), as the experiment
    state Tune saved last records them. An interrupted run (Ctrl-C, SIGINT) saves its state with the
    running trials RUNNING and only then stops them, marking them TERMINATED in memory, so ``fit``'s
    own trials cannot tell it from a finished run; nor can they count the trials not yet started."""
    from ray.tune import ExperimentAnalysis

    saved = ExperimentAnalysis(results.experiment_path, storage_filesystem=tune_filesystem(files)).trials
    return len(saved) >= trials and all(trial.status in ("TERMINATED", "ERROR") for trial in saved)


CONFIRM_SUFFIX = "-confirm"


def train_seeds(resolved: ResolvedSearch, config: dict, seeds: Sequence[int], name: str):
    """``config`` (the searched hyperparameters; the rest are the plan's) trained once per seed in
    ``seeds``: the trials of one Tune run, ``name`` in the run directory, as many at once as the
    resource plan allows. Called again with the name of an interrupted run, it continues that run
    (with the seeds it was started with). Returns Tune's results; raises KeyboardInterrupt when the
    run was interrupted."""
    from ray import tune

    trainable, files = _trainable(resolved), resolved.train_plan.run_files
    experiment = f"{TUNE_DIR}/{name}"
    saved = files.children(experiment)
    if "tuner.pkl" in saved and not any(n.startswith("experiment_state-") and n.endswith(".json") for n in saved):
        files.delete_dir(experiment)  # interrupted before Tune saved any state: nothing ran, nothing to restore
        saved = []
    if "tuner.pkl" in saved:
        tuner = tune.Tuner.restore(
            files.path(experiment),
            trainable=trainable,
            resume_unfinished=True,
            storage_filesystem=tune_filesystem(files),
        )
    else:
        tuner = tune.Tuner(
            trainable,
            param_space={**config, "seed": tune.grid_search(list(seeds))},
            tune_config=tune.TuneConfig(max_concurrent_trials=resolved.resources.max_concurrent, reuse_actors=False),
            run_config=tune.RunConfig(
                name=name,
                storage_path=files.path(TUNE_DIR),
                storage_filesystem=tune_filesystem(files),
                failure_config=tune.FailureConfig(max_failures=resolved.search.max_trial_failures),
                callbacks=_callbacks(resolved),
                verbose=tune_verbosity(),
            ),
        )
    with libraries_quiet_unless_told():
        results = tuner.fit()
    if not finished(results, len(seeds), files):
        raise KeyboardInterrupt  # the caller's own handling: the same command continues the run
    _release_ended(results, resolved)
    return results


def confirm_winner(resolved: ResolvedSearch, winner) -> dict:
    """``search.confirm_seeds``: the winner's configuration trained again with that many more
    training seeds (``train.seed`` + 1, + 2, ...), each run chosen and reported like a trial
    (best round by the validation objective, test scores reported). Returns the record the
    leaderboard keeps (``confirmation_record``): mean ± sample std over the new seeds only, the
    winner's own run apart. An interrupted confirmation continues on ``--resume``."""
    from platform.leaderboard import confirmation_record, rows_from_results

    search = resolved.search
    seeds = [resolved.train_plan.seed + i for i in range(1, search.confirm_seeds + 1)]
    config = {name: winner.hyperparameters[name] for name in search.space if name in winner.hyperparameters}
    log.info(f"doctune: confirming {winner.trial} with {len(seeds)} more training seed(s): {seeds}")
    results = train_seeds(resolved, config, seeds, f"{search.name}{CONFIRM_SUFFIX}")
    runs = {}
    for result, row in zip(results, rows_from_results(results, resolved)):
        if row.checkpoint is not None:
            read_locked_part(resolved, row)
            runs[int(result.config["seed"])] = row
    return confirmation_record(winner, resolved.train_plan.seed, runs, len(seeds))


def read_locked_part(resolved: ResolvedSearch, row) -> None:
    """Score ``row``'s chosen checkpoint on the objective's test parts and set its ``test_objective``.
    A search's rounds read validation only, so a trial's locked test part is read here, once the
    search has chosen, for the rows it reports (the winner and its confirmation runs)."""
    from evaluators.pool import score_checkpoint, stored_model
    from evaluators.scores import main_scores

    evaluation = dataclasses.replace(resolved.evaluation, parts=("test",))
    model = stored_model(resolved.train_plan.run_files, row.checkpoint)
    scores = score_checkpoint(evaluation, model, row.hyperparameters["pooling"], list(evaluation.tasks))
    for task, parts in scores.items():
        row.scores.setdefault(task, {}).update(parts)
    row.test_objective = evaluation.objective_of(main_scores(row.scores, "test"))
