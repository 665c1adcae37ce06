"""A recipe study's rows as searches (``python -m platform.study``): each row's configuration trained
once per seed with nothing searched (``fixed_runs``), the best rows searched from their own values
(``tuned_search``), and the table's columns and tasks."""

from __future__ import annotations

import dataclasses

from platform.spec.schema import SearchSpec


def base_row_name(spec: SearchSpec) -> str:
    """The untouched base's row: a vanilla base made here has seen the masked-LM objective only; the
    spec's own encoder is shown as loaded (converted to a Longformer, where the backbone says so)."""
    if spec.base is not None:
        return "base (MLM only)"
    return "base (converted, untrained)" if spec.backbone.longformer is not None else "base (untrained here)"


def table_columns(spec: SearchSpec, extra_tasks: list[str]) -> list[tuple[str, str]]:
    """(task, metric) pairs, in table order; an extra task shows its main score."""
    columns = [(task, metric) for task, metrics in spec.study.table.items() for metric in metrics]
    return columns + [(task, "main") for task in extra_tasks if task not in spec.study.table]


def with_tasks(spec: SearchSpec, tasks: list[str]) -> SearchSpec:
    """Every table task loaded by the evaluators (the objective's tasks still rank the rows)."""
    objective = set(spec.search.objective.tasks or {}) | {
        t for w in (spec.search.objective.objectives or {}).values() for t in w
    }
    report = tuple(dict.fromkeys([*spec.evaluation.report_tasks, *(t for t in tasks if t not in objective)]))
    return dataclasses.replace(spec, evaluation=dataclasses.replace(spec.evaluation, report_tasks=report))


def fixed_runs(spec: SearchSpec, row: dict, seeds: list[int]) -> SearchSpec:
    """``row``'s configuration, one trial per seed in ``seeds``: nothing searched, nothing stopped
    early; ``study.rounds`` evenly spaced scoring rounds, the last at ``train.steps``, each round's
    weights kept (the table scores the last round, which need not be the best a trial keeps)."""
    values = dict(row)
    recipe = values.pop("recipe", spec.recipe)
    rounds = spec.study.rounds if spec.study is not None else 1
    return dataclasses.replace(
        spec,
        recipe=recipe,
        hyperparameters={**spec.hyperparameters, **values},
        # as many trials as seeds, so the resource plan runs them at once where the cluster allows
        search=dataclasses.replace(
            spec.search,
            space={},
            samples=len(seeds),
            warm_start=(),
            scheduler=dataclasses.replace(spec.search.scheduler, asha=None, pbt=None),
        ),
        train=dataclasses.replace(
            spec.train,
            seed=seeds[0],
            eval_every=spec.train.steps // rounds,
            keep_checkpoints="all" if rounds > 1 else spec.train.keep_checkpoints,
        ),
    )


def tuned_search(spec: SearchSpec, row: dict, seed: int) -> SearchSpec:
    """The normal search over ``search.space`` for ``row``'s recipe, starting from the row's values."""
    values = dict(row)
    recipe = values.pop("recipe", spec.recipe)
    space = {name: dist for name, dist in spec.search.space.items() if name != "recipe"}
    start = {name: values[name] for name in space if name in values}
    fixed = {name: value for name, value in values.items() if name not in space}
    return dataclasses.replace(
        spec,
        recipe=recipe,
        hyperparameters={**spec.hyperparameters, **fixed},
        search=dataclasses.replace(spec.search, space=space, warm_start=(start,) if start else ()),
        train=dataclasses.replace(spec.train, seed=seed),
    )
