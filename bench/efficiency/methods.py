"""The search methods replayed on a table; each is ``(table, seed, samples) -> Replay``.

- ``random``: ``samples`` configurations drawn without replacement, each run to the last round.
- ``grid``: the papers' practice, nested loops over the grid with the order of the dimensions and of
  each dimension's values shuffled by the seed; the first ``samples`` points are run.
- ``tpe`` / ``tpe_independent``: Optuna's TPE built by ``platform.strategies.samplers`` exactly as a search
  builds it (multivariate or independent), asked and told through ask/tell. A suggestion is snapped
  to the nearest grid value of each numeric dimension (in log space for ``loguniform``); Optuna keeps
  the raw suggestion and is told the validation objective of the trial's last round (what Ray's
  ``OptunaSearch`` tells it), or a failed state when that cell is empty. A suggestion that snaps to
  a configuration already run is run again and costs its steps again, as a real search on a discrete
  space would.
- ``random_asha`` / ``tpe_asha``: the same samplers under asynchronous successive halving over the
  evaluation rounds (``bench.efficiency.asha``). A stopped trial costs only the rounds it ran.

Simplification: trials run one after another (concurrency 1). With concurrent trials ASHA compares a
trial against fewer finished rungs and TPE's later suggestions see fewer results, so the replay is the
most favourable case for both.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Callable

import numpy as np
import optuna

from bench.efficiency.replay import Replay, replay_order
from bench.efficiency.table import Table
from platform.strategies.samplers import make_sampler, plan_sampler


def _draw(table: Table, seed: int, samples: int) -> list[int]:
    if samples > len(table.configs):
        raise ValueError(f"{samples} samples without replacement from a table of {len(table.configs)} configurations")
    return [int(c) for c in np.random.default_rng(seed).choice(len(table.configs), size=samples, replace=False)]


def grid_order(table: Table, seed: int) -> list[int]:
    """Every configuration in nested-loop order: the first dimension of a seeded permutation of the
    dimensions is the outer loop, and each dimension's values are visited in a seeded permutation."""
    rng = np.random.default_rng(seed)
    dims = [int(d) for d in rng.permutation(len(table.space))]
    sizes = [len(dim.values) for dim in table.space.values()]
    value_orders = {d: [int(i) for i in rng.permutation(sizes[d])] for d in dims}
    order = []
    for combination in itertools.product(*(value_orders[d] for d in dims)):
        point = [0] * len(dims)
        for d, i in zip(dims, combination, strict=True):
            point[d] = i
        order.append(table.config_at(tuple(point)))
    return order


def random_search(table: Table, seed: int, samples: int) -> Replay:
    return replay_order(table, _draw(table, seed, samples))


def random_asha(table: Table, seed: int, samples: int) -> Replay:
    return replay_order(table, _draw(table, seed, samples), asha=True)


def grid_search(table: Table, seed: int, samples: int) -> Replay:
    if samples > len(table.configs):
        raise ValueError(f"grid search of {samples} points on a table of {len(table.configs)} configurations")
    return replay_order(table, grid_order(table, seed)[:samples])


def tpe_replay(table: Table, seed: int, samples: int, multivariate: bool, asha: bool) -> Replay:
    """``samples`` trials suggested by the product's TPE sampler, snapped onto the table."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    plan = plan_sampler("tpe", samples, concurrent=False, multivariate=multivariate)
    distributions = {name: dim.distribution() for name, dim in table.space.items()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)  # multivariate TPE, in Optuna 4
        sampler = make_sampler(plan, distributions, seed)
    study = optuna.create_study(direction="maximize", sampler=sampler)
    replay = Replay(table, asha)
    for _ in range(samples):
        trial = study.ask()
        point = []
        for name, dim in table.space.items():
            if dim.kind == "choice":
                value = trial.suggest_categorical(name, list(dim.values))
            elif dim.kind == "int":
                value = trial.suggest_int(name, *distributions[name].values)
            else:
                value = trial.suggest_float(name, *distributions[name].values, log=dim.kind == "loguniform")
            point.append(dim.index(value))
        last = replay.run(table.config_at(tuple(point)))
        if math.isnan(last):
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
        else:
            study.tell(trial, last)
    return replay


def tpe_search(table: Table, seed: int, samples: int) -> Replay:
    return tpe_replay(table, seed, samples, multivariate=True, asha=False)


def tpe_independent(table: Table, seed: int, samples: int) -> Replay:
    return tpe_replay(table, seed, samples, multivariate=False, asha=False)


def tpe_asha(table: Table, seed: int, samples: int) -> Replay:
    return tpe_replay(table, seed, samples, multivariate=True, asha=True)


Method = Callable[[Table, int, int], Replay]
METHODS: dict[str, Method] = {
    "random": random_search,
    "grid": grid_search,
    "tpe": tpe_search,
    "tpe_independent": tpe_independent,
    "random_asha": random_asha,
    "tpe_asha": tpe_asha,
}
