"""Population Based Training's search (``search.scheduler.pbt``): the population PBT draws, its
scheduler, and what it may perturb. The trial's side (pointer checkpoints, exploits) is
``trainers.population``; docs/decisions.md, "PBT", says why it is built this way."""

from __future__ import annotations

from ray.tune.experiment import Trial
from ray.tune.schedulers import PopulationBasedTraining
from ray.tune.schedulers.pb2 import PB2

from platform.resolution import ResolvedSearch
from platform.spec import Distribution
from platform.spec.schema import SearchSection
from trainers.config import PERTURBABLE


def population_search(search: SearchSection):
    """PBT's (or PB2's) search: the population drawn at random from the space (the warm starts
    first; the draw seeded, PBT's own perturbations not), and the synchronous scheduler perturbing
    the dimensions a trial may change mid-run (``trainers.config.PERTURBABLE``)."""
    from ray.tune.search import BasicVariantGenerator

    pbt = search.scheduler.pbt
    space = {name: tune_domain(dist) for name, dist in search.space.items()}
    generator = BasicVariantGenerator(
        points_to_evaluate=[dict(point) for point in search.warm_start[: search.samples]] or None,
        random_state=search.seed,
    )
    common = {
        "time_attr": "eval_round",
        "metric": "objective",
        "mode": "max",
        "perturbation_interval": pbt.perturbation_interval,
        "quantile_fraction": pbt.quantile_fraction,
        "synch": True,  # donor and receiver at the same step (trainers.population)
    }
    perturbed = {name: dist for name, dist in search.space.items() if name in PERTURBABLE}
    if pbt.method == "pb2":
        bounds = {name: list(dist.values) for name, dist in perturbed.items() if dist.kind != "choice"}
        return generator, space, SynchronousPB2(hyperparam_bounds=bounds, **common)
    # a choice as a list: PBT moves it to a neighbouring value (a domain it would multiply by 0.8 or 1.2)
    mutations = {name: list(d.values) if d.kind == "choice" else space[name] for name, d in perturbed.items()}
    ranges = {name: tuple(d.values) for name, d in perturbed.items() if d.kind != "choice"}
    scheduler = SynchronousPBT(
        hyperparam_mutations=mutations,
        resample_probability=pbt.resample_probability,
        custom_explore_fn=WithinRanges(ranges),
        **common,
    )
    return generator, space, scheduler


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


def describe_population(resolved: ResolvedSearch) -> str:
    """PBT's plan in one line, with a warning where no trial can ever exploit."""
    pbt = resolved.spec.search.scheduler.pbt
    perturbed = [name for name in resolved.spec.search.space if name in PERTURBABLE]
    line = (
        f"{pbt.method.upper()} (synchronous) over {resolved.spec.search.samples} trial(s) drawn at random: every "
        f"{pbt.perturbation_interval} round(s) the bottom {pbt.quantile_fraction:.0%} continue from a top "
        f"{pbt.quantile_fraction:.0%} trial's checkpoint with {', '.join(perturbed)} perturbed"
    )
    if resolved.plan.eval_rounds <= pbt.perturbation_interval:
        line += (
            f"; note: trials have {resolved.plan.eval_rounds} round(s), so none goes on after a perturbation "
            "round and PBT is random search here"
        )
    return line
