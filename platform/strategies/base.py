"""What a search strategy is: how Tune draws a search's trials and which ones it stops early.

Each search mode is one module here, built once by ``platform.strategies.build.strategy_for``:
Optuna with ASHA stopping the trials behind (``optuna_asha``), Optuna without early stopping
(``optuna_only``: one round, ``asha: null`` or several objectives), and Population Based Training
(``population``). A strategy holds its whole plan; ``platform.search_path.tuner`` hands its parts to Tune.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple


class TuneParts(NamedTuple):
    """What a strategy gives ``tune.Tuner``: its searcher (``search_alg``, None for Tune's own), the
    parameter space Tune samples itself (None where the searcher draws), the scheduler, and the
    stop condition (None: the trial's own end)."""

    search_alg: Any
    param_space: dict | None
    scheduler: Any
    stop: dict | None = None


class SearchStrategy:
    """A search mode. ``population``: trials continue from each other's rounds (PBT), so every
    round's checkpoint is kept until the search ends; otherwise an ended trial's checkpoints are
    released as it ends (``train.keep_checkpoints``)."""

    population: bool = False

    def tune_parts(self, run_dir: Path) -> TuneParts:
        raise NotImplementedError

    def describe(self) -> str | None:
        """One line for the search's start (``doctune: sampler: ...``), or None."""
        return None

    def warning(self) -> str | None:
        """One line when the plan defeats the strategy (a budget too small to guide), or None."""
        return None

    def after_search(self, run_dir: Path) -> str | None:
        """Tidy what a killed search may have left (an Optuna trial never reported); a note, or None."""
        return None
