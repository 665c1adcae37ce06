"""How a search draws its trials and stops them: one module per search mode (``base`` says what a
strategy is), built once from the spec's ``search:`` section by ``strategy_for`` (``build``); past that, the
driver reads the strategy, never the spec.

- ``optuna_asha``: Optuna draws each trial, ASHA stops the trials behind (the default);
- ``optuna_only``: Optuna without early stopping (one round, ``asha: null``, several objectives);
- ``population``: Population Based Training (``scheduler: {pbt: ...}``);
- ``samplers``: the Optuna sampler sized to the budget; ``optuna_base``: the Optuna study the two Optuna
  modes share.
"""

from __future__ import annotations

from platform.strategies.base import SearchStrategy, TuneParts
from platform.strategies.build import strategy_for

__all__ = ["SearchStrategy", "TuneParts", "strategy_for"]
