"""Search efficiency of doctune's samplers and schedulers, replayed on a table of real training runs.

    python bench/search_efficiency.py build --spec bench/efficiency_docsplit.yaml   # about an hour on 2 CPUs
    python bench/search_efficiency.py replay --table TABLE.csv [--methods random:16 tpe:16 ...] [--seeds 50]

The tabular benchmark method of HPOBench and LCBench: every configuration of a grid over the search
space is trained once, with its validation and test objective recorded after every evaluation round,
into ``NAME.csv`` (columns ``config,round,step,val_objective,test_objective,hp.<name>...``; one row
per configuration and round) and ``NAME.json`` (``steps``, ``eval_every``, ``rounds``, the ``space``
with each dimension's kind and grid values, the ``asha`` settings and how the table was made). A
search method is then *replayed* on the table: instead of training, a trial looks its numbers up.
That costs microseconds, so every method runs with 50 seeds or more and the comparison is between
distributions of outcomes, not between single lucky or unlucky searches.

A replay is a trace: after every evaluation round any trial runs, the training steps consumed so far,
the best validation objective of every (trial, round) seen so far, and the test objective at the
(trial, round) holding that best (ties: the earlier one) -- the product picks each trial's checkpoint
with the best validation objective and reports its test score. A configuration whose objective cells
are empty failed: it still costs its steps, never holds the best (it counts as -inf), and ASHA leaves
it out of its rung percentiles (Ray's ``nanpercentile`` does the same with a NaN report).

Methods (``METHODS``; each is ``(table, seed, samples) -> trace``):

- ``random``: ``samples`` configurations drawn without replacement, each run to the last round.
- ``grid``: the papers' practice, nested loops over the grid with the order of the dimensions and of
  each dimension's values shuffled by the seed; the first ``samples`` points are run.
- ``tpe`` / ``tpe_independent``: Optuna's TPE built by ``platform.samplers`` exactly as a search
  builds it (multivariate or independent), asked and told through ask/tell. A suggestion is snapped
  to the nearest grid value of each numeric dimension (in log space for ``loguniform``); Optuna keeps
  the raw suggestion and is told the validation objective of the trial's last round (what Ray's
  ``OptunaSearch`` tells it), or a failed state when that cell is empty. A suggestion that snaps to
  a configuration already run is run again and costs its steps again, as a real search on a discrete
  space would.
- ``random_asha`` / ``tpe_asha``: the same samplers under asynchronous successive halving over the
  evaluation rounds, a replica of Ray Tune 2.60's ``ASHAScheduler`` (one bracket, ``max_t`` = the
  rounds, ``grace_period`` and ``reduction_factor`` from the table's ``asha``). A stopped trial costs
  only the rounds it ran.

Simplification: trials run one after another (concurrency 1). With concurrent trials ASHA compares a
trial against fewer finished rungs and TPE's later suggestions see fewer results, so the replay is the
most favourable case for both.

Aggregation: every trace is read as a step function on a common budget grid (every multiple of
``eval_every`` up to the largest total consumed; undefined before the trace's first event, held after
its last). Per method and budget, the median and quartiles over seeds of the best validation objective
and of the pick's test objective; at each method's own end, the same plus the median steps consumed;
and the compute each method needs for its median to reach random search's final median, as a ratio of
random search's budget.

Speed (measured on one core of a 2-core CPU VM, on a 54-configuration, 4-round table of the
``docsplit`` space): 50 seeds of the six default methods replay in about 5 s, nearly all of it TPE
at 1-2 ms per trial (``tpe_asha`` 2.2 s, ``tpe_independent`` 1.7 s, ``tpe`` 0.9 s; random, grid and
random_asha together 0.15 s).
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import math
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import optuna

ROOT = Path(__file__).resolve().parent.parent
if __name__ == "__main__":  # run as a script: the project's ``platform`` package must come before the stdlib's
    sys.path.insert(0, str(ROOT))
if not hasattr(sys.modules.get("platform"), "__path__"):  # the stdlib module, imported by a library
    sys.modules.pop("platform", None)

from platform.samplers import make_sampler, plan_sampler  # noqa: E402
from platform.spec import Distribution  # noqa: E402

KINDS = ("uniform", "loguniform", "int", "choice")
DEFAULT_METHODS = ("random:16", "grid:16", "tpe:16", "tpe_independent:16", "random_asha:32", "tpe_asha:32")
DEFAULT_OUT = ROOT / "bench" / "out" / "search_efficiency"
QUANTILES = (25, 50, 75)


class Event(NamedTuple):
    """The state of a search after one evaluation round of one trial."""

    consumed: int  # training steps consumed so far, over every trial
    best_val: float  # best validation objective of any (trial, round) so far; -inf while none succeeded
    test_of_pick: float  # test objective at that (trial, round); NaN while none succeeded


Trace = list[Event]


@dataclass(frozen=True)
class Dimension:
    kind: str  # uniform, loguniform, int, choice
    values: tuple  # the table's grid values along it, in the JSON's order

    def distribution(self) -> Distribution:
        """The dimension as a search spec declares it: the grid's range, or its choices."""
        if self.kind == "choice":
            return Distribution("choice", self.values)
        low, high = min(self.values), max(self.values)
        return Distribution(self.kind, (int(low), int(high)) if self.kind == "int" else (float(low), float(high)))

    def index(self, value: Any) -> int:
        """The grid value nearest ``value`` (in log space for ``loguniform``); a choice must match."""
        if self.kind == "choice":
            return self.values.index(value)
        scale = np.log if self.kind == "loguniform" else np.asarray
        return int(np.argmin(np.abs(scale(np.asarray(self.values, dtype=float)) - scale(float(value)))))

    def cell_index(self, cell: str) -> int | None:
        """The grid value a CSV cell holds, or None when it is not on the grid."""
        for i, value in enumerate(self.values):
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                try:
                    if math.isclose(float(cell), value, rel_tol=1e-9, abs_tol=1e-12):
                        return i
                except ValueError:
                    continue
            elif str(value) == cell:
                return i
        return None


@dataclass(frozen=True)
class Asha:
    grace_period: int
    reduction_factor: float


@dataclass(frozen=True)
class Table:
    """A recorded table: ``val[c, r]`` and ``test[c, r]`` of configuration ``c`` after round ``r + 1``
    (NaN where it failed); ``grid[c]`` its index along every dimension of ``space``."""

    name: str
    steps: int
    eval_every: int
    rounds: int
    space: dict[str, Dimension]
    asha: Asha
    configs: tuple[str, ...]  # the ``config`` column, in first-appearance order
    grid: tuple[tuple[int, ...], ...]
    val: np.ndarray
    test: np.ndarray
    made_by: dict

    def config_at(self, point: tuple[int, ...]) -> int:
        """The configuration at a point of the grid (its index along every dimension)."""
        return self._lookup[point]

    @cached_property
    def _lookup(self) -> dict[tuple[int, ...], int]:
        return {point: c for c, point in enumerate(self.grid)}


def _float(cell: str) -> float:
    return float(cell) if cell.strip() else math.nan


def _space(meta: dict, where: str) -> dict[str, Dimension]:
    space = {}
    for name, declared in meta["space"].items():
        ((kind, values),) = declared.items()
        if kind not in KINDS:
            raise ValueError(f"{where}: dimension {name!r} has kind {kind!r}, not one of {KINDS}")
        space[name] = Dimension(kind, tuple(values))
    return space


def _point(row: dict[str, str], space: dict[str, Dimension], where: str) -> tuple[int, ...]:
    point = []
    for name, dim in space.items():
        cell = row.get(f"hp.{name}")
        index = None if cell is None else dim.cell_index(cell)
        if index is None:
            raise ValueError(f"{where}: hp.{name}={cell} is not on the grid {dim.values}")
        point.append(index)
    return tuple(point)


def _check_grid(points: dict[str, tuple[int, ...]], space: dict[str, Dimension], where: str) -> None:
    """ValueError unless ``points`` (configuration -> grid point) covers the whole grid, each point once."""
    seen: dict[tuple[int, ...], str] = {}
    for config, point in points.items():
        if point in seen:
            raise ValueError(f"{where}: configurations {seen[point]} and {config} are the same point of the grid")
        seen[point] = config
    names = list(space)
    missing = [
        ", ".join(f"{names[d]}={space[names[d]].values[i]}" for d, i in enumerate(point))
        for point in itertools.product(*(range(len(dim.values)) for dim in space.values()))
        if point not in seen
    ]
    if missing:
        listed = "; ".join(missing[:10]) + ("; ..." if len(missing) > 10 else "")
        raise ValueError(f"{where}: {len(missing)} configuration(s) of the grid are missing: {listed}")


def load_table(csv_path: str | Path) -> Table:
    """Read ``NAME.csv`` and the ``NAME.json`` beside it; ValueError unless the table holds every
    round of every point of the grid the JSON's ``space`` spans, once."""
    csv_path = Path(csv_path)
    where = csv_path.name
    meta = json.loads(csv_path.with_suffix(".json").read_text())
    rounds, eval_every = int(meta["rounds"]), int(meta["eval_every"])
    if int(meta["steps"]) != rounds * eval_every:
        raise ValueError(f"{where}: steps {meta['steps']} != rounds {rounds} x eval_every {eval_every}")
    space = _space(meta, where)
    results: dict[str, dict[int, tuple[float, float]]] = {}
    points: dict[str, tuple[int, ...]] = {}
    with csv_path.open(newline="") as handle:
        for line, row in enumerate(csv.DictReader(handle), start=2):
            config, round_ = row["config"], int(row["round"])
            if not 1 <= round_ <= rounds or int(float(row["step"])) != round_ * eval_every:
                raise ValueError(f"{where}:{line}: round {round_} at step {row['step']} is off the schedule")
            point = _point(row, space, f"{where}:{line}")
            if points.setdefault(config, point) != point:
                raise ValueError(f"{where}:{line}: configuration {config} changes its hyperparameters")
            if round_ in results.setdefault(config, {}):
                raise ValueError(f"{where}:{line}: configuration {config} has round {round_} twice")
            results[config][round_] = (_float(row["val_objective"]), _float(row["test_objective"]))
    short = [f"{config} (has rounds {sorted(r)})" for config, r in results.items() if len(r) != rounds]
    if short:
        raise ValueError(f"{where}: configurations missing rounds: {', '.join(short)}")
    _check_grid(points, space, where)
    configs = tuple(results)
    return Table(
        name=meta["name"],
        steps=int(meta["steps"]),
        eval_every=eval_every,
        rounds=rounds,
        space=space,
        asha=Asha(int(meta["asha"]["grace_period"]), float(meta["asha"]["reduction_factor"])),
        configs=configs,
        grid=tuple(points[config] for config in configs),
        val=np.array([[results[c][r][0] for r in range(1, rounds + 1)] for c in configs]),
        test=np.array([[results[c][r][1] for r in range(1, rounds + 1)] for c in configs]),
        made_by=meta.get("made_by", {}),
    )


class AshaBracket:
    """Ray Tune 2.60's ``AsyncHyperBandScheduler`` with one bracket (``_Bracket`` with ``s = 0``),
    ``time_attr`` = the evaluation round, ``mode="max"`` and ``stop_last_trials``."""

    def __init__(self, max_t: int, asha: Asha) -> None:
        self.max_t = max_t
        self.rf = asha.reduction_factor
        min_t = asha.grace_period
        count = int(np.log(max_t / min_t) / np.log(self.rf) + 1)
        self.rungs: list[tuple[float, dict[int, float]]] = [(min_t * self.rf**k, {}) for k in reversed(range(count))]

    def on_trial_result(self, trial: int, round_: int, value: float) -> bool:
        """True when the trial is to stop after this round (Ray's ``TrialScheduler.STOP``)."""
        return round_ >= self.max_t or self._bracket_result(trial, round_, value)

    def on_trial_complete(self, trial: int, round_: int, value: float) -> None:
        """Ray hands the stopped trial's last result to the bracket once more (it can only fill rung ``max_t``)."""
        self._bracket_result(trial, round_, value)

    def _bracket_result(self, trial: int, round_: int, value: float) -> bool:
        for milestone, recorded in self.rungs:
            if round_ < milestone or trial in recorded:
                continue
            stop = False
            if recorded:
                with warnings.catch_warnings():  # every recorded value NaN: no cutoff, as in Ray
                    warnings.simplefilter("ignore", RuntimeWarning)
                    cutoff = np.nanpercentile(list(recorded.values()), (1 - 1 / self.rf) * 100)
                stop = bool(value < cutoff)
            recorded[trial] = value
            return stop
        return False


class Replay:
    """Trials run one after another on a table, with or without ASHA; ``events`` is the trace and
    ``configs`` the configuration each trial ran."""

    def __init__(self, table: Table, asha: bool) -> None:
        self.table = table
        self.bracket = AshaBracket(table.rounds, table.asha) if asha else None
        self.events: Trace = []
        self.configs: list[int] = []
        self._best, self._pick, self._consumed = -math.inf, math.nan, 0

    def run(self, config: int) -> float:
        """Run one trial of ``config``; the validation objective of its last round (NaN: failed)."""
        trial = len(self.configs)
        self.configs.append(config)
        for r in range(self.table.rounds):
            value = float(self.table.val[config, r])
            self._consumed += self.table.eval_every
            if value > self._best:
                self._best, self._pick = value, float(self.table.test[config, r])
            self.events.append(Event(self._consumed, self._best, self._pick))
            if self.bracket is not None and self.bracket.on_trial_result(trial, r + 1, value):
                self.bracket.on_trial_complete(trial, r + 1, value)
                break
        return value


def replay_order(table: Table, order: Sequence[int], asha: bool = False) -> Trace:
    """The trace of running the configurations ``order`` (indices into ``table.configs``) in turn."""
    replay = Replay(table, asha)
    for config in order:
        replay.run(config)
    return replay.events


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


def random_search(table: Table, seed: int, samples: int) -> Trace:
    return replay_order(table, _draw(table, seed, samples))


def random_asha(table: Table, seed: int, samples: int) -> Trace:
    return replay_order(table, _draw(table, seed, samples), asha=True)


def grid_search(table: Table, seed: int, samples: int) -> Trace:
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


def tpe_search(table: Table, seed: int, samples: int) -> Trace:
    return tpe_replay(table, seed, samples, multivariate=True, asha=False).events


def tpe_independent(table: Table, seed: int, samples: int) -> Trace:
    return tpe_replay(table, seed, samples, multivariate=False, asha=False).events


def tpe_asha(table: Table, seed: int, samples: int) -> Trace:
    return tpe_replay(table, seed, samples, multivariate=True, asha=True).events


Method = Callable[[Table, int, int], Trace]
METHODS: dict[str, Method] = {
    "random": random_search,
    "grid": grid_search,
    "tpe": tpe_search,
    "tpe_independent": tpe_independent,
    "random_asha": random_asha,
    "tpe_asha": tpe_asha,
}


def at_budgets(trace: Trace, budgets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """best_val and test_of_pick of a trace at each budget: its last event with ``consumed <= budget``
    (NaN before its first event)."""
    consumed = np.array([event.consumed for event in trace])
    index = np.searchsorted(consumed, budgets, side="right") - 1
    best = np.array([event.best_val for event in trace] + [math.nan])
    test = np.array([event.test_of_pick for event in trace] + [math.nan])
    return best[index], test[index]  # index -1 (before the first event) reads the NaN appended


def quartiles(samples: np.ndarray) -> np.ndarray:
    """25th, 50th and 75th percentiles over axis 0 (linear interpolation). -inf (no successful round
    yet) ranks below everything and an interpolation touching it is -inf; NaN (undefined) propagates."""
    finite = samples[np.isfinite(samples)]
    lowest = float(finite.min()) if finite.size else 0.0
    floor = lowest - max(1.0, abs(lowest))
    result = np.percentile(np.where(np.isneginf(samples), floor, samples), QUANTILES, axis=0)
    return np.where(result < lowest, -math.inf, result)


def _summary(values: np.ndarray) -> dict[str, float]:
    p25, median, p75 = quartiles(values)
    return {"median": float(median), "p25": float(p25), "p75": float(p75)}


def aggregate(table: Table, traces: dict[str, list[Trace]], samples: dict[str, int]) -> dict:
    """Per method (its traces, one per seed): the quartile curves over the common budget grid, the
    quartiles at its own end, and the budget its median needs to reach random search's final median."""
    largest = max(trace[-1].consumed for runs in traces.values() for trace in runs)
    budgets = np.arange(table.eval_every, largest + 1, table.eval_every)
    methods: dict[str, dict] = {}
    for name, runs in traces.items():
        best, test = zip(*(at_budgets(trace, budgets) for trace in runs), strict=True)
        best_q, test_q = quartiles(np.array(best)), quartiles(np.array(test))
        methods[name] = {
            "samples": samples[name],
            "seeds": len(runs),
            "curve": {
                "best_val": {key: q.tolist() for key, q in zip(("p25", "median", "p75"), best_q, strict=True)},
                "test_of_pick": {key: q.tolist() for key, q in zip(("p25", "median", "p75"), test_q, strict=True)},
            },
            "final_steps": _summary(np.array([float(trace[-1].consumed) for trace in runs])),
            "final_best_val": _summary(np.array([trace[-1].best_val for trace in runs])),
            "final_test_of_pick": _summary(np.array([trace[-1].test_of_pick for trace in runs])),
        }
    target = None
    if "random" in methods:
        random_budget = samples["random"] * table.steps
        target = {
            "budget": random_budget,
            "best_val": methods["random"]["curve"]["best_val"]["median"][int(random_budget // table.eval_every) - 1],
        }
    for entry in methods.values():
        reached = None
        if target is not None:
            medians = np.array(entry["curve"]["best_val"]["median"])
            hits = np.flatnonzero(medians >= target["best_val"])
            reached = int(budgets[hits[0]]) if hits.size else None
        entry["steps_to_target"] = reached
        entry["ratio_vs_random"] = None if reached is None else reached / target["budget"]
    return {
        "table": table.name,
        "configs": len(table.configs),
        "steps": table.steps,
        "eval_every": table.eval_every,
        "rounds": table.rounds,
        "asha": {"grace_period": table.asha.grace_period, "reduction_factor": table.asha.reduction_factor},
        "made_by": table.made_by,
        "budgets": budgets.tolist(),
        "random_target": target,
        "methods": methods,
    }


def diagnostics(table: Table) -> dict[str, float]:
    """How much there is to find in the table, on the last round: the spread of the validation
    objective over configurations, how well the validation ranking predicts the test ranking
    (Spearman), and the test objective of the best-validation configuration against the best test
    objective any configuration has (the most a search could report). A rank correlation near 0
    means the validation objective is mostly noise, and no sampler can beat random search."""
    from scipy.stats import spearmanr

    val, test = table.val[:, -1], table.test[:, -1]
    ok = np.isfinite(val) & np.isfinite(test)
    val, test = val[ok], test[ok]
    return {
        "configurations": int(ok.sum()),
        "val_range": float(val.max() - val.min()),
        "val_std": float(val.std(ddof=1)),
        "spearman_val_test": float(spearmanr(val, test).statistic),
        "test_of_best_val": float(test[np.argmax(val)]),
        "best_test": float(test.max()),
        "median_test": float(np.median(test)),
    }


def replay(table: Table, samples: dict[str, int], seeds: int) -> dict:
    """Every method of ``samples`` (name -> trials) replayed with seeds ``0..seeds-1``, aggregated;
    each method's replay wall time is under ``methods.<name>.seconds``."""
    traces: dict[str, list[Trace]] = {}
    seconds: dict[str, float] = {}
    for name, count in samples.items():
        began = time.perf_counter()
        traces[name] = [METHODS[name](table, seed, count) for seed in range(seeds)]
        seconds[name] = time.perf_counter() - began
    result = aggregate(table, traces, samples)
    for name, entry in result["methods"].items():
        entry["seconds"] = round(seconds[name], 3)
    result["diagnostics"] = diagnostics(table)
    return result


def _finite(value: Any) -> Any:
    """``value`` with every non-finite float as None (JSON has no -inf or NaN)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_finite(item) for item in value]
    return value


def _iqr(summary: dict[str, float]) -> str:
    return f"{summary['median']:.4f} ({summary['p25']:.4f}-{summary['p75']:.4f})"


def markdown(result: dict) -> str:
    """The comparison as a Markdown table."""
    lines = [
        "| method | trials | median final steps | median best val (IQR) | median test of pick (IQR) "
        "| steps to reach random's final median | ratio vs random |",
        "|---|---:|---:|---|---|---:|---:|",
    ]
    for name, entry in result["methods"].items():
        reached, ratio = entry["steps_to_target"], entry["ratio_vs_random"]
        lines.append(
            f"| {name} | {entry['samples']} | {entry['final_steps']['median']:.0f} | {_iqr(entry['final_best_val'])} "
            f"| {_iqr(entry['final_test_of_pick'])} | {'never' if reached is None else reached} "
            f"| {'-' if ratio is None else f'{ratio:.2f}'} |"
        )
    if "diagnostics" in result:
        d = result["diagnostics"]
        lines += [
            "",
            f"Last round over {d['configurations']} configurations: validation objective range {d['val_range']:.4f} "
            f"(std {d['val_std']:.4f}); Spearman(validation, test) {d['spearman_val_test']:.2f}; test objective of "
            f"the best-validation configuration {d['test_of_best_val']:.4f}, best test {d['best_test']:.4f}, "
            f"median test {d['median_test']:.4f}.",
        ]
    return "\n".join(lines)


def plot(result: dict, path: Path) -> None:
    """Median and IQR band of each method's best validation objective and pick's test objective against
    the training steps consumed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    budgets = np.array(result["budgets"])
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8))
    for name, entry in result["methods"].items():
        for ax, key in zip(axes, ("best_val", "test_of_pick"), strict=True):
            curve = {q: np.array(v, dtype=float) for q, v in entry["curve"][key].items()}
            curve = {q: np.where(np.isfinite(v), v, np.nan) for q, v in curve.items()}
            (line,) = ax.plot(
                budgets, curve["median"], drawstyle="steps-post", label=f"{name} ({entry['samples']} trials)"
            )
            ax.fill_between(
                budgets, curve["p25"], curve["p75"], step="post", color=line.get_color(), alpha=0.18, linewidth=0
            )
    if result["random_target"] is not None:
        axes[0].axhline(
            result["random_target"]["best_val"], color="grey", linestyle="--", label="random search's final median"
        )
    axes[0].set_ylabel("best validation objective so far")
    axes[1].set_ylabel("test objective of the picked checkpoint")
    for ax in axes:
        ax.set_xlabel("training steps consumed")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    seeds = max(entry["seeds"] for entry in result["methods"].values())
    fig.suptitle(f"{result['table']}: search efficiency, median and IQR over {seeds} seeds")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _method(text: str) -> tuple[str, int]:
    name, _, count = text.partition(":")
    if name not in METHODS or not count.isdigit() or int(count) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected NAME:SAMPLES with NAME one of {', '.join(METHODS)}")
    return name, int(count)


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a positive integer")
    return int(text)


def _replay_command(args: argparse.Namespace) -> int:
    table = load_table(args.table)
    samples = dict(args.methods)
    began = time.perf_counter()
    result = replay(table, samples, args.seeds)
    elapsed = time.perf_counter() - began
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{table.name}.json").write_text(json.dumps(_finite(result), indent=1) + "\n")
    plot(result, args.out / f"{table.name}.png")
    print(f"{table.name}: {len(table.configs)} configurations x {table.rounds} rounds, {args.seeds} seeds\n")
    print(markdown(result))
    print(f"\nreplayed in {elapsed:.1f} s; wrote {args.out / table.name}.json and .png")
    return 0


def _build_command(args: argparse.Namespace) -> int:
    from bench.efficiency_table import build

    run_dir = args.run_dir or ROOT / "bench" / "out" / args.spec.stem
    table_path = args.table or ROOT / "bench" / "data" / f"{args.spec.stem}.csv"
    table = build(args.spec, run_dir, table_path, args.profile, train=not args.no_train)
    print(f"wrote {table} and {table.with_suffix('.json').name}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    replay_parser = commands.add_parser("replay", help="replay search methods on a recorded table")
    replay_parser.add_argument("--table", type=Path, required=True, help="NAME.csv (NAME.json beside it)")
    replay_parser.add_argument(
        "--methods", type=_method, nargs="+", default=[_method(m) for m in DEFAULT_METHODS], help="NAME:SAMPLES ..."
    )
    replay_parser.add_argument("--seeds", type=_positive, default=50, help="seeds 0..N-1 per method")
    replay_parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    replay_parser.set_defaults(handler=_replay_command)
    build_parser = commands.add_parser(
        "build", help="train every configuration of a grid spec (or resume), then write its table"
    )
    build_parser.add_argument("--spec", type=Path, required=True, help="a spec with sampler: grid and asha: null")
    build_parser.add_argument("--profile", default="local", choices=("full", "local", "smoke"))
    build_parser.add_argument("--run-dir", type=Path, help="default: bench/out/<spec name>")
    build_parser.add_argument("--table", type=Path, help="default: bench/data/<spec name>.csv")
    build_parser.add_argument(
        "--no-train", action="store_true", help="merge what the run directory holds into the table; train nothing"
    )
    build_parser.set_defaults(handler=_build_command)
    args = parser.parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
