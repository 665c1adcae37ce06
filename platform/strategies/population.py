"""Population Based Training (``search.scheduler.pbt``): the population drawn at random, the
synchronous scheduler, and what it may perturb. The trial's side (pointer checkpoints, exploits) is
``trainers.population``; docs/decisions/population-based-training.md says why it is built this way."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ray.tune.experiment import Trial
from ray.tune.schedulers import PopulationBasedTraining
from ray.tune.schedulers.pb2 import PB2

from platform.spec.schema import Distribution, PbtSpec
from platform.strategies.base import SearchStrategy, TuneParts
from trainers.settings import PERTURBABLE


@dataclass(frozen=True)
class Population(SearchStrategy):
    """PBT's (or PB2's) search: the population drawn at random from the space (the warm starts
    first; the draw seeded, PBT's own perturbations not), and the synchronous scheduler perturbing
    the dimensions a trial may change mid-run (``trainers.settings.PERTURBABLE``). A trial's last
    round ends it before the scheduler sees it (``stop``): Tune applies its stop condition first,
    so no trial is exploited (and restarted) at the end of its training."""

    pbt: PbtSpec
    space: dict[str, Distribution]
    samples: int
    seed: int
    rounds: int  # a trial's evaluation rounds
    warm_start: tuple[dict, ...] = ()
    population = True

    def tune_parts(self, run_dir: Path) -> TuneParts:
        from ray.tune.search import BasicVariantGenerator

        generator = BasicVariantGenerator(
            points_to_evaluate=[dict(point) for point in self.warm_start] or None, random_state=self.seed
        )
        space = {name: tune_domain(dist) for name, dist in self.space.items()}
        return TuneParts(generator, space, self.scheduler(space), stop={"eval_round": self.rounds})

    def scheduler(self, space: dict):
        return population_scheduler(self.pbt, self.space, space)

    def describe(self) -> str:
        """PBT's plan in one line, with a note where no trial can ever exploit."""
        pbt = self.pbt
        perturbed = [name for name in self.space if name in PERTURBABLE]
        line = (
            f"scheduler: {pbt.method.upper()} (synchronous) over {self.samples} trial(s) drawn at random: every "
            f"{pbt.perturbation_interval} round(s) the bottom {pbt.quantile_fraction:.0%} continue from a top "
            f"{pbt.quantile_fraction:.0%} trial's checkpoint with {', '.join(perturbed)} perturbed"
        )
        if self.rounds <= pbt.perturbation_interval:
            line += (
                f"; note: trials have {self.rounds} round(s), so none goes on after a perturbation "
                "round and PBT is random search here"
            )
        return line


def population_scheduler(pbt: PbtSpec, searched: dict[str, Distribution], space: dict):
    """The synchronous PBT (or PB2) scheduler over ``searched`` (``space``: its Tune domains)."""
    common = {
        "time_attr": "eval_round",
        "metric": "objective",
        "mode": "max",
        "perturbation_interval": pbt.perturbation_interval,
        "quantile_fraction": pbt.quantile_fraction,
        "synch": True,  # donor and receiver at the same step (trainers.population)
    }
    perturbed = {name: dist for name, dist in searched.items() if name in PERTURBABLE}
    if pbt.method == "pb2":
        bounds = {name: list(dist.values) for name, dist in perturbed.items() if dist.kind != "choice"}
        return SynchronousPB2(hyperparam_bounds=bounds, **common)
    # a choice as a list: PBT moves it to a neighbouring value (a domain it would multiply by 0.8 or 1.2)
    mutations = {name: list(d.values) if d.kind == "choice" else space[name] for name, d in perturbed.items()}
    ranges = {name: tuple(d.values) for name, d in perturbed.items() if d.kind != "choice"}
    return SynchronousPBT(
        hyperparam_mutations=mutations,
        resample_probability=pbt.resample_probability,
        custom_explore_fn=WithinRanges(ranges),
        **common,
    )


def tune_domain(dist: Distribution):
    """One searched dimension as a Tune search-space domain."""
    from ray import tune

    if dist.kind == "choice":
        return tune.choice(list(dist.values))
    low, high = dist.values
    if dist.kind == "int":
        return tune.randint(low, high + 1)  # Tune's upper bound is exclusive
    return tune.loguniform(low, high) if dist.kind == "loguniform" else tune.uniform(low, high)


class _UnfinishedTrials:
    """Tune's controller as PBT sees it, its live trials without those that ended: Tune keeps a
    trial that errored for good among its live ones."""

    def __init__(self, controller) -> None:
        self._controller = controller

    def get_live_trials(self) -> set:
        return {trial for trial in self._controller.get_live_trials() if not trial.is_finished()}

    def __getattr__(self, name: str):
        return getattr(self._controller, name)


class _WaitsOnlyForUnfinishedTrials:
    """Synchronous PBT (Ray 2.60) pauses each trial at a perturbation round until every live trial
    has reached it, and Tune counts a trial that errored for good (a diverged loss, its retries
    spent) as live: the others would wait for it forever. Here the wait counts only the trials
    that have not ended; and when every unfinished trial is paused at the round (the last one to
    arrive errored instead), one of them is restarted, reports that round again (a resumed trial
    does, ``trainers.reporting``) and the perturbation goes ahead."""

    def on_trial_result(self, tune_controller, trial, result: dict) -> str:
        return super().on_trial_result(_UnfinishedTrials(tune_controller), trial, result)

    def choose_trial_to_run(self, tune_controller):
        chosen = super().choose_trial_to_run(tune_controller)
        if chosen is not None:
            return chosen
        trials = tune_controller.get_trials()
        if any(trial.status in (Trial.RUNNING, Trial.PENDING) for trial in trials):
            return None
        waiting = [trial for trial in trials if trial.status == Trial.PAUSED]
        return min(waiting, key=lambda trial: self._trial_state[trial].last_train_time, default=None)


class SynchronousPBT(_WaitsOnlyForUnfinishedTrials, PopulationBasedTraining):
    """Ray's PBT, waiting at a perturbation round only for the trials that have not ended."""


class SynchronousPB2(_WaitsOnlyForUnfinishedTrials, PB2):
    """Ray's PB2, waiting at a perturbation round only for the trials that have not ended."""


class WithinRanges:
    """PBT's explore step multiplies a numeric value by 0.8 or 1.2 with no bound: each perturbed
    value is kept inside the range the spec searches. A class, so Tune can save it with the search."""

    def __init__(self, ranges: dict[str, tuple[float, float]]) -> None:
        self.ranges = ranges

    def __call__(self, config: dict) -> dict:
        for name, (low, high) in self.ranges.items():
            if name in config:
                config[name] = min(max(config[name], low), high)
        return config
