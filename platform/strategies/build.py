"""The one place a spec's ``search:`` section becomes a strategy (``platform.search_path.plans.resolve``
calls it once); past it, the driver reads the strategy."""

from __future__ import annotations

from typing import TYPE_CHECKING

from platform.strategies.base import SearchStrategy

if TYPE_CHECKING:
    from platform.spec.schema import SearchSection


def strategy_for(
    name: str, search: SearchSection, metrics: tuple[str, ...], rounds: int, concurrent: bool
) -> SearchStrategy:
    """The strategy of a search named ``name`` whose ``search:`` section is ``search``, maximising
    ``metrics`` (several: NSGA-II, and no early stopping), with trials of ``rounds`` evaluation
    rounds, ``concurrent``: several at once. Its modules load here: PBT's imports Ray Tune."""
    from platform.strategies.optuna_asha import OptunaAsha
    from platform.strategies.optuna_base import OptunaPlan
    from platform.strategies.optuna_only import OptunaWithoutEarlyStopping
    from platform.strategies.samplers import plan_sampler

    warm_start = tuple(dict(point) for point in search.warm_start[: search.samples])
    if search.scheduler.pbt is not None:
        from platform.strategies.population import Population

        return Population(search.scheduler.pbt, search.space, search.samples, search.seed, rounds, warm_start)
    optuna = None
    if search.space:
        kind = "nsga2" if len(metrics) > 1 else search.sampler
        sampler = plan_sampler(kind, search.samples, concurrent, search.multivariate, search.grid_points)
        optuna = OptunaPlan(name, search.space, sampler, search.seed, metrics, warm_start)
    asha = search.scheduler.asha
    if asha is None or rounds <= 1 or len(metrics) > 1:
        return OptunaWithoutEarlyStopping(optuna)
    return OptunaAsha(optuna, asha, rounds)
