"""Optuna without early stopping: every trial trains to its end (Tune's FIFO scheduler). The mode a
search takes where ASHA cannot help or cannot work: trials of one evaluation round, ``asha: null``,
and several objectives (ASHA stops on one scalar; a trial behind on the first may be on the front)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from platform.strategies.base import TuneParts
from platform.strategies.optuna_base import OptunaPlan, OptunaStrategy


@dataclass(frozen=True)
class OptunaWithoutEarlyStopping(OptunaStrategy):
    optuna: OptunaPlan | None

    def tune_parts(self, run_dir: Path) -> TuneParts:
        from ray.tune.schedulers import FIFOScheduler

        return TuneParts(self.searcher(run_dir), None, FIFOScheduler())
