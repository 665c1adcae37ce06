"""Optuna + ASHA, the default search mode: Optuna draws each trial, and ASHA (asynchronous
successive halving; Li et al., MLSys 2020) stops the trials behind at the evaluation rounds.
``search.scheduler.asha`` configures it (``grace_period``: rounds before a trial can be stopped;
``reduction_factor``: the halving rate); the rounds are a trial's ``eval_round``s, so ``max_t`` is
the plan's number of rounds and the rung a trial reaches is a round it was scored at."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from platform.spec.schema import AshaSpec
from platform.strategies.base import TuneParts
from platform.strategies.optuna_base import OptunaPlan, OptunaStrategy


@dataclass(frozen=True)
class OptunaAsha(OptunaStrategy):
    optuna: OptunaPlan | None
    asha: AshaSpec
    rounds: int  # a trial's evaluation rounds: ASHA's max_t

    def scheduler(self):
        from ray.tune.schedulers import ASHAScheduler

        return ASHAScheduler(
            time_attr="eval_round",
            metric="objective",
            mode="max",
            max_t=self.rounds,
            grace_period=self.asha.grace_period,
            reduction_factor=self.asha.reduction_factor,
        )

    def tune_parts(self, run_dir: Path) -> TuneParts:
        return TuneParts(self.searcher(run_dir), None, self.scheduler())
