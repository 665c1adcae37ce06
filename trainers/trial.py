"""One Tune trial: build and fit a Ray Train ``TorchTrainer`` for one configuration.

This is Ray 2.60's Train-in-Tune pattern: a Tune function trainable whose ``TorchTrainer`` reports
back to Tune through ``TuneReportCallback`` (under PBT, through ``trainers.population``, with a
checkpoint). The Train run's storage is the trial's directory in the run's storage
(``TrainPlan.run_files``), where its reported checkpoints persist, so a resumed search finds them
again.
"""

from __future__ import annotations

import dataclasses
import logging

from doctune_core.logs import library_log_level
from trainers.checkpoint import CHECKPOINTS, divergence, trial_path
from trainers.config import TrainPlan
from trainers.distributed import collective_backend
from trainers.settings import SETTINGS, TrialSettings

log = logging.getLogger(f"doctune.{__name__}")


class TrialDiverged(FloatingPointError):
    """The training loss stopped being finite: the trial ends as errored, with this reason."""


def run_trial(config: dict, plan: TrainPlan, fixed: dict) -> None:
    """``config``: the searched hyperparameters Tune sampled (and, for a confirmation run of the
    winner, its training ``seed``); ``fixed``: the rest."""
    import ray.train
    from ray import tune
    from ray.train.torch import TorchConfig, TorchTrainer
    from ray.tune.integration.ray_train import TuneReportCallback

    from trainers.loop import train_loop_per_worker

    trial_id = tune.get_context().get_trial_id()
    files = plan.run_files
    if reason := divergence(files, trial_id):  # a resumed search does not retrain a diverged trial
        raise TrialDiverged(f"trial {trial_id}: {reason}")
    if "seed" in config:
        plan = dataclasses.replace(plan, seed=int(config["seed"]))
    hp = TrialSettings(**{**fixed, **{k: v for k, v in config.items() if k in SETTINGS}})
    resources = {"CPU": plan.cpus_per_worker} | ({"GPU": plan.gpus_per_worker} if plan.use_gpu else {})

    def trainer(callbacks: list) -> TorchTrainer:
        return TorchTrainer(
            train_loop_per_worker,
            train_loop_config={"plan": plan, "hp": hp, "trial_id": trial_id},
            scaling_config=ray.train.ScalingConfig(
                num_workers=plan.workers, use_gpu=plan.use_gpu, resources_per_worker=resources
            ),
            torch_config=TorchConfig(backend=collective_backend(plan.use_gpu)),
            # the trial's rounds persist to trials/<id>/checkpoints/step_N (trainers.checkpoint) in the
            # run's storage; a resumed trial's Train run finds them there again (its checkpoint
            # manager's snapshot)
            run_config=ray.train.RunConfig(
                name=CHECKPOINTS,
                storage_path=files.path(trial_path(trial_id)),
                storage_filesystem=None if files.local else files.filesystem,
                callbacks=callbacks,
                failure_config=ray.train.FailureConfig(
                    max_failures=plan.max_worker_failures, controller_failure_limit=3
                ),
                logging_config=ray.train.LoggingConfig(log_level=library_log_level()),
            ),
        )

    if plan.population:  # PBT exploits through Tune checkpoints, which Train-in-Tune does not report
        from trainers.population import continue_from_donor, fit_reporting_to_tune

        if record := continue_from_donor(files, trial_id, config):
            log.info(f"[{trial_id}] PBT: continues from {record['donor']} at step {record['step']} with {config}")
        fit_reporting_to_tune(trial_id, trainer)
    else:
        trainer([TuneReportCallback()]).fit()
    if reason := divergence(files, trial_id):
        raise TrialDiverged(f"trial {trial_id}: {reason}")
