"""The Tune wiring: from a resolved search to finished trials.

From a ``ResolvedSearch`` (``platform.search_path.resolution``), never the spec: ``run_search`` runs the
search's strategy (``platform.strategies``: Optuna + ASHA, Optuna alone, PBT) over Ray Train trials
with the evaluator pool up (``evaluator_pool``); ``train_seeds`` trains one configuration with
several seeds (the winner's confirmation, ``platform.results.winner.confirm_winner``; the recipe
study's rows). What the trials establish is ``platform.results``'s, which never imports this module.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Sequence
from contextlib import contextmanager

from doctune_core.logs import shows_library_output
from doctune_core.run_files import RunFiles
from doctune_core.run_layout import TUNE_DIR
from platform.rundir.timings import PhaseClock
from platform.search_path.plans import ResolvedSearch

log = logging.getLogger(f"doctune.{__name__}")


def tune_verbosity() -> int | None:
    """Tune's console output (its status table every 30 seconds, each trial's start and end): its own
    default with ``-v`` (``doctune_core.logs.shows_library_output``), silent otherwise, doctune's own
    lines saying what a person needs; a failed trial's error is printed either way (Tune logs it at
    ERROR; see ``libraries_quiet_unless_told``)."""
    return None if shows_library_output() else 0


@contextmanager
def libraries_quiet_unless_told():
    """A Tune run's making and fitting, the libraries' console output shown with ``-v`` alone. Quiet, two
    libraries need more than Tune's verbosity (``tune_verbosity``): Tune's new output engine prints an
    experiment's start (its configuration, where its results are) at every verbosity, 0 included,
    while its legacy engine prints nothing at 0, so a quiet run uses the legacy one
    (``RAY_AIR_NEW_OUTPUT=0``, read as the run starts); Optuna logs its study's creation (when the
    searcher is made) at INFO through a handler of its own, so its verbosity is WARNING. Both are put
    back after the block."""
    if shows_library_output():
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
        return _restored(files, experiment, _trainable(resolved), resume_errored=True)
    param_space, tune_config, run_config = tune_setup(resolved, callbacks)
    return tune.Tuner(_trainable(resolved), param_space=param_space, tune_config=tune_config, run_config=run_config)


def _restored(files: RunFiles, experiment: str, trainable, resume_errored: bool = False):
    """The Tune run saved at ``experiment`` in the run's files, restored to go on, its console as this
    call's verbosity asks (``tune_verbosity``), not as the call that saved it did: a run started
    with ``-v`` and resumed without it would otherwise print Tune's status every few seconds."""
    from ray import tune

    tuner = tune.Tuner.restore(
        files.path(experiment),
        trainable=trainable,
        resume_unfinished=True,
        resume_errored=resume_errored,
        storage_filesystem=tune_filesystem(files),
    )
    if tuner._local_tuner is not None:  # through Ray Client the run lives remotely: left as saved
        tuner._local_tuner.get_run_config().verbose = tune_verbosity()  # Tune offers no setter of its own
    return tuner


def tune_filesystem(files: RunFiles):
    """The file system Tune and Train write the run's files through: None (their own choice, a local
    path) where the run is on this machine's disk, else the run's (an S3-compatible server's
    endpoint travels in it, which a URI string given to Tune would lose)."""
    return None if files.local else files.filesystem


def _callbacks(resolved: ResolvedSearch, more: Sequence = ()) -> list:
    """Every Tune run's callbacks: ended trials' checkpoints released (not under PBT: a trial may go
    on from any round of another until the search ends), TensorBoard without the per-round test
    scores (``platform.tracking``), every round to the calling code's listeners
    (``platform.search_path.listeners``), ``more`` (the trackers'), and last the driver's records uploaded to
    the run's storage (``platform.rundir.records``), so that they hold what the others recorded."""
    from platform.rundir.records import UploadRecords
    from platform.search_path.listeners import TrialListeners
    from platform.tracking import ValidationOnlyTensorBoard

    released = [] if resolved.search.strategy.population else [_release_callback(resolved)]
    return [
        *released,
        ValidationOnlyTensorBoard(resolved.train_plan.run_files),
        TrialListeners(),
        *more,
        UploadRecords(),
    ]


def _release_callback(resolved: ResolvedSearch):
    from platform.rundir.retention import ReleaseEndedTrials

    return ReleaseEndedTrials(resolved.train_plan.run_files, resolved.evaluation, resolved.search.keep_checkpoints)


def _release_ended(results, resolved: ResolvedSearch) -> None:
    from platform.rundir.retention import release_ended_trials

    keep = resolved.search.keep_checkpoints
    freed = release_ended_trials(results, resolved.train_plan.run_files, resolved.evaluation, keep)
    if freed:
        log.info(f"doctune: ended trials' checkpoints released ({freed / 1e6:.0f} MB; train.keep_checkpoints: {keep})")


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
    """Run the trials (``callbacks``: more Tune callbacks, such as the trackers'). Returns Tune's
    results; raises KeyboardInterrupt when the trials were interrupted."""
    clock = clock or PhaseClock()
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
    return results


def finished(results, trials: int, files: RunFiles) -> bool:
    """Whether all ``trials`` of a Tune run ended (completed, stopped or errored), as the experiment
    state Tune saved last records them. An interrupted run (Ctrl-C, SIGINT) saves its state with the
    running trials RUNNING and only then stops them, marking them TERMINATED in memory, so ``fit``'s
    own trials cannot tell it from a finished run; nor can they count the trials not yet started."""
    from ray.tune import ExperimentAnalysis

    saved = ExperimentAnalysis(results.experiment_path, storage_filesystem=tune_filesystem(files)).trials
    return len(saved) >= trials and all(trial.status in ("TERMINATED", "ERROR") for trial in saved)


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
        tuner = _restored(files, experiment, trainable)
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
