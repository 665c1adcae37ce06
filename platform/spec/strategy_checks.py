"""What the search strategies need of a spec's space: a grid whose every point is a distinct
configuration (``sampler: grid``), and a space PBT can perturb (``scheduler.pbt``)."""

from __future__ import annotations

from platform.spec.grid import grid_size
from platform.spec.schema import SearchSection, SpecError
from trainers.settings import PERTURBABLE


def check_strategy(search: SearchSection) -> None:
    """Refuse (``SpecError``) a space the search's sampler or scheduler cannot work through."""
    _check_grid(search)
    _check_population(search)


def _check_grid(search: SearchSection) -> None:
    """A grid search needs a space every point of which is a distinct configuration, and no more
    samples than points."""
    if search.sampler != "grid" or not search.space:
        return
    if search.objective.objectives:
        raise SpecError(
            "search.sampler: grid searches one objective; several objectives are searched with NSGA-II "
            "(drop sampler: grid, or name one objective under search.objective.tasks)"
        )
    if search.warm_start:
        raise SpecError(
            "search.warm_start: a grid search visits its own points, and a warm-start point would take a grid "
            "point's place; drop warm_start or use sampler: tpe or random"
        )
    _refuse_conditions(
        search,
        "a grid search takes every combination of values, so conditional dimensions would repeat "
        "configurations; drop the conditions or use sampler: tpe or random",
    )
    points = grid_size(search.space, search.grid_points)
    if search.samples > points:
        raise SpecError(
            f"search.samples ({search.samples}) exceeds the grid's {points} points (choices x {search.grid_points} "
            f"values per numeric range); set samples to at most {points} or raise search.grid_points"
        )


def _refuse_conditions(search: SearchSection, why: str) -> None:
    conditional = [name for name, dist in search.space.items() if dist.when]
    if conditional:
        raise SpecError(f"search.space.{conditional[0]}.when: {why}")


def _check_population(search: SearchSection) -> None:
    """PBT needs one objective, a space it can perturb, no conditions (it draws every dimension at
    random) and an MLM head that exists in donor and receiver alike."""
    if search.scheduler.pbt is None:
        return
    where = "search.scheduler.pbt"
    if search.objective.objectives:
        raise SpecError(f"{where}: PBT follows one objective; name one under search.objective.tasks or drop pbt")
    if search.sampler == "grid":
        raise SpecError(f"{where}: PBT draws its own population at random; drop sampler: grid or drop pbt")
    if search.confirm_seeds:
        raise SpecError(
            "search.confirm_seeds: a PBT trial's settings change as it trains (and it may go on from another's "
            "weights), so retraining its final settings would confirm a different run; set confirm_seeds: 0"
        )
    if not any(name in PERTURBABLE for name in search.space):
        raise SpecError(
            f"{where}: search.space has nothing PBT can perturb mid-trial; search one of {', '.join(PERTURBABLE)}"
        )
    numeric = [n for n, d in search.space.items() if n in PERTURBABLE and d.kind != "choice"]
    if search.scheduler.pbt.method == "pb2" and not numeric:
        raise SpecError(
            f"{where}.method: pb2 chooses numeric values within ranges; search one of {', '.join(PERTURBABLE)} as a "
            "range ({loguniform: [lo, hi]}), or use method: pbt"
        )
    _refuse_conditions(
        search, "PBT draws every dimension at random; drop the conditions or use sampler: tpe without pbt"
    )
    if "trainable" in search.space:
        raise SpecError(
            "search.space.trainable: under PBT a trial continues from another's weights and optimizer state, which "
            "train other parameters where trainable differs; fix trainable under hyperparameters"
        )
    if "position_init" in search.space:
        raise SpecError(
            "search.space.position_init: under PBT a trial continues from another's weights, whose positions "
            "started as the other's position_init; fix position_init under hyperparameters"
        )
    mlm = search.space.get("mlm_weight")
    if mlm is not None and min(mlm.values) <= 0:
        raise SpecError(
            "search.space.mlm_weight: under PBT every value must be above 0 (the MLM head exists only with a "
            "weight, and a trial continues from another's checkpoint, head included); search e.g. "
            "{loguniform: [0.01, 0.5]} or fix the weight"
        )
