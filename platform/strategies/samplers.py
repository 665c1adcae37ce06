"""The Optuna samplers a search uses, sized to the search's budget.

Optuna's defaults assume hundreds of trials: ``TPESampler`` samples at random until 10 trials
have finished and ``NSGAIISampler``'s first generation (50 by default) is random too, so at the
budgets doctune searches with (4 trials at ``--profile local``, 16-32 on a cluster) both would be
random search from start to end. Here:

- TPE's random start-up is ``startup_trials(samples)`` = a quarter of the budget, at least 2 and
  at most Optuna's 10; the rest are model-guided. ``constant_liar`` is set explicitly (on when
  trials run concurrently, so concurrent trials do not all get the same suggestion; its default
  changed between Optuna 4 and 5). ``multivariate`` TPE (joint density over the dimensions, and
  ``group`` for conditional spaces) is the default; ``search.multivariate: false`` gives the
  independent TPE. bench/RESULTS.md, "Search efficiency", measured both.
- NSGA-II's population is ``population_size(samples)`` = a quarter of the budget, at least 4, at
  most Optuna's 50: the first generation is random, the later ones evolve.
- ``random``: Optuna's ``RandomSampler``. ``grid``: the papers' practice, a grid over every
  ``choice`` dimension and ``search.grid_points`` evenly spaced points per numeric range
  (geometrically for ``loguniform``), visited in a seeded random order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from platform.spec.grid import grid_space

if TYPE_CHECKING:
    from platform.spec.schema import Distribution

OPTUNA_DEFAULT_STARTUP = 10  # TPESampler's n_startup_trials
OPTUNA_DEFAULT_POPULATION = 50  # NSGAIISampler's population_size


def startup_trials(samples: int) -> int:
    """TPE's random start-up trials for a budget of ``samples`` trials."""
    return min(OPTUNA_DEFAULT_STARTUP, max(2, math.ceil(samples / 4)))


def population_size(samples: int) -> int:
    """NSGA-II's population (= its random first generation) for a budget of ``samples`` trials."""
    return min(OPTUNA_DEFAULT_POPULATION, max(4, math.ceil(samples / 4)))


@dataclass(frozen=True)
class SamplerPlan:
    """Which sampler a search runs and how its budget divides into random and guided trials."""

    kind: str  # tpe, nsga2, random, grid
    samples: int
    random_trials: int  # trials drawn without a model (TPE start-up, NSGA-II's first generation, all)
    concurrent: bool
    multivariate: bool = True
    grid_points: int = 3

    @property
    def guided_trials(self) -> int:
        return max(0, self.samples - self.random_trials)

    def describe(self) -> str:
        if self.kind == "tpe":
            liar = ", constant liar" if self.concurrent else ""
            kind = "multivariate TPE" if self.multivariate else "TPE"
            return f"{kind}{liar}: {self.random_trials} random start-up trial(s), {self.guided_trials} model-guided"
        if self.kind == "nsga2":
            first = min(self.samples, self.random_trials)
            population = f"NSGA-II, population {self.random_trials}"
            return f"{population}: {first} random (first generation), {self.guided_trials} evolved"
        if self.kind == "grid":
            return f"grid search ({self.grid_points} points per numeric range): {self.samples} grid point(s)"
        return f"random search: {self.samples} trial(s)"

    def warning(self) -> str | None:
        """One line when the budget leaves the model-based sampler nothing to guide."""
        if self.kind in ("tpe", "nsga2") and self.guided_trials <= 0:
            return (
                f"search.samples {self.samples} leaves no model-guided trial ({self.describe()}): this is random "
                f"search; raise search.samples to at least {self.random_trials + 1}, or say sampler: random"
            )
        return None


def plan_sampler(
    kind: str, samples: int, concurrent: bool, multivariate: bool = True, grid_points: int = 3
) -> SamplerPlan:
    random_trials = {
        "tpe": min(samples, startup_trials(samples)),
        "nsga2": population_size(samples),  # a generation needs at least 4 here, whatever the budget
    }.get(kind, samples)
    return SamplerPlan(kind, samples, random_trials, concurrent, multivariate, grid_points)


def make_sampler(plan: SamplerPlan, space: dict[str, Distribution], seed: int):
    """The Optuna sampler object for ``plan`` (Ray's ``OptunaSearch`` passes it through unchanged)."""
    import optuna

    if plan.kind == "tpe":
        conditional = any(dist.when for dist in space.values())
        return optuna.samplers.TPESampler(
            seed=seed,
            n_startup_trials=plan.random_trials,
            constant_liar=plan.concurrent,
            multivariate=plan.multivariate,
            group=plan.multivariate and conditional,
        )
    if plan.kind == "nsga2":
        return optuna.samplers.NSGAIISampler(seed=seed, population_size=plan.random_trials)
    if plan.kind == "grid":
        return optuna.samplers.GridSampler(grid_space(space, plan.grid_points), seed=seed)
    return optuna.samplers.RandomSampler(seed=seed)
