"""Checks across fields of a built spec: what a single key's type and range cannot say (a base
encoder named once, the evaluation length within the model's positions, a grid that fits the
samples, a study's rows, a recipe's needs)."""

from __future__ import annotations

from platform.spec.convert import HP_FIELDS, check_hyperparameter, plugin_registries
from platform.spec.schema import Distribution, SearchSection, SearchSpec, SpecError
from platform.spec.strategy_checks import check_strategy
from platform.spec.study import StudySection
from trainers.pairs import recipe_loss


def check_model_choice(layer: dict, where: str) -> None:
    """One layer of a spec (the spec itself, or one profile's overrides) names one base encoder."""
    if layer.get("base") is not None and "base_model" in layer:
        raise SpecError(
            f"{where}base_model: give either base_model (an existing encoder) or base: (one trained from scratch "
            "here), not both"
        )


def check_views_choice(merged: dict) -> None:
    """``views`` (an augmentation type) decides the recipe and the recipe's settings the type fixes
    (as the recipes declare them: DocSplit's ``elongate``), so a spec that gives it, fixed or
    searched, gives none of those."""
    space = (merged.get("search") or {}).get("space") or {}
    fixed = merged.get("hyperparameters") or {}
    if "views" not in space and "views" not in fixed:
        return
    from trainers.pairs import VIEWS

    decided = list(dict.fromkeys(setting for name in VIEWS for setting in VIEWS[name].settings))
    given = {"recipe": "recipe" in merged, "search.space.recipe": "recipe" in space}
    given |= {f"search.space.{setting}": setting in space for setting in decided}
    given |= {f"hyperparameters.{setting}": setting in fixed for setting in decided}
    clash = next((key for key, present in given.items() if present), None)
    if clash is not None:
        views = "search.space.views" if "views" in space else "hyperparameters.views"
        made = "; ".join(f"{name}: {VIEWS[name].recipe}" for name in VIEWS)
        fixes = " and ".join(["the recipe", *decided])
        raise SpecError(f"{clash}: {views} decides {fixes} ({made}); drop {clash}")


def _check_base(spec: SearchSpec) -> None:
    """A trained base must fit the trials: heads that divide the hidden size, a batch the workers
    share equally, and positions for every token the trials and evaluators feed it."""
    base = spec.base
    if base is None:
        return
    if base.hidden % base.heads:
        raise SpecError(f"base.heads: base.hidden ({base.hidden}) must be a multiple of base.heads ({base.heads})")
    if base.batch_size % workers_checked(spec):
        raise SpecError(
            f"base.batch_size ({base.batch_size}) must be a multiple of train.workers ({workers_checked(spec)}): "
            "the base trains on the trials' workers, each taking an equal share"
        )
    if spec.backbone.longformer is not None:  # the conversion copies the learned positions out
        return
    for key, value in (
        ("train.max_length", spec.train.max_length),
        ("evaluation.max_length", spec.evaluation.max_length),
    ):
        if value > base.max_length:
            raise SpecError(
                f"{key} ({value}) exceeds base.max_length ({base.max_length}), the positions the base learns; "
                f"raise base.max_length or lower {key}"
            )


def check_semantics(spec: SearchSpec) -> None:
    """What a single key's type cannot say: names that must exist, keys that must agree."""
    _check_hyperparameters(spec)
    _check_space(spec)
    _check_recipe_needs(spec)
    _check_base(spec)
    _check_lengths_and_steps(spec)
    _check_objective(spec)
    _check_warm_start(spec.search)
    check_strategy(spec.search)
    if spec.study is not None:
        _check_study(spec.study, spec.train.steps)
    _check_tracking(spec)


def _check_hyperparameters(spec: SearchSpec) -> None:
    """The fixed hyperparameters and the recipe: known names, valid values, set in their place."""
    for key, value in spec.hyperparameters.items():
        if key in ("recipe", "batch_size"):
            raise SpecError(
                f"hyperparameters.{key}: set it with the top-level `{key}` key (or search it)"
                if key == "recipe"
                else "hyperparameters.batch_size: set it with train.batch_size"
            )
        check_hyperparameter(key, value, f"hyperparameters.{key}")
    check_hyperparameter("recipe", spec.recipe, "recipe")


def _check_space(spec: SearchSpec) -> None:
    """Each searched dimension: a known hyperparameter, valid values, batch sizes the workers share
    evenly, and conditions that name an earlier choice and values it can take."""
    earlier: dict[str, Distribution] = {}
    for key, dist in spec.search.space.items():
        where = f"search.space.{key}"
        if key not in HP_FIELDS:
            raise SpecError(f"{where}: unknown hyperparameter; searchable: {', '.join(HP_FIELDS)}")
        for value in dist.values:
            check_hyperparameter(key, value, f"{where}.{dist.kind}")
        if key == "batch_size" and any(v % workers_checked(spec) for v in dist.values):
            raise SpecError(f"{where}: every batch size must be a multiple of train.workers ({workers_checked(spec)})")
        for name, allowed in dist.when:
            if name not in earlier:
                raise SpecError(
                    f"{where}.when: {name!r} is not a dimension searched before {key!r}; a condition "
                    "names an earlier entry of search.space"
                )
            if earlier[name].kind != "choice" or any(v not in earlier[name].values for v in allowed):
                raise SpecError(
                    f"{where}.when: {name} never takes {list(allowed)} (its choices: {list(earlier[name].values)})"
                )
        earlier[key] = dist


def _check_lengths_and_steps(spec: SearchSpec) -> None:
    """Lengths within the Longformer's, a scored checkpoint, a batch the workers share evenly."""
    longformer = spec.backbone.longformer
    if longformer is not None:
        if longformer.attention_window % 2:
            raise SpecError(f"backbone.longformer.attention_window: must be even, got {longformer.attention_window}")
        for key, value in (
            ("train.max_length", spec.train.max_length),
            ("evaluation.max_length", spec.evaluation.max_length),
        ):
            if value > longformer.max_length:
                raise SpecError(f"{key} ({value}) exceeds backbone.longformer.max_length ({longformer.max_length})")
    if spec.train.eval_every > spec.train.steps:
        raise SpecError(
            f"train.eval_every ({spec.train.eval_every}) exceeds train.steps ({spec.train.steps}): "
            "no checkpoint would be scored"
        )
    if spec.train.batch_size % workers_checked(spec) and "batch_size" not in spec.search.space:
        raise SpecError(
            f"train.batch_size ({spec.train.batch_size}) must be a multiple of train.workers "
            f"({workers_checked(spec)}): each worker takes an equal share"
        )


def _check_objective(spec: SearchSpec) -> None:
    """One objective or several named ones, each with known tasks at positive weights; the
    report-only tasks known too."""
    from evaluators.tasks import UnknownTask, check_task_name

    objective = spec.search.objective
    if bool(objective.tasks) == bool(objective.objectives):
        raise SpecError(
            "search.objective: give either tasks (one objective, e.g. {news-title-retrieval: 1.0}) or objectives "
            "(several named ones, e.g. {quality: {r8-fewshot: 1.0}, robustness: {length-robustness: 1.0}})"
        )
    if len(objective.objectives) == 1:
        raise SpecError("search.objective.objectives: name two or more objectives, or use tasks for one")
    groups = {f"search.objective.objectives.{n}": t for n, t in objective.objectives.items()} or {
        "search.objective.tasks": objective.tasks
    }
    for key, tasks in groups.items():
        if not tasks:
            raise SpecError(f"{key}: name at least one task")
    groups["evaluation.report_tasks"] = dict.fromkeys(spec.evaluation.report_tasks, 1.0)
    for key, tasks in groups.items():
        for task, weight in tasks.items():
            if weight <= 0:
                raise SpecError(f"{key}.{task}: weight must be > 0, got {weight}")
            try:
                check_task_name(task)
            except UnknownTask as err:
                raise SpecError(f"{key}: {err.args[0]}") from None


def _check_tracking(spec: SearchSpec) -> None:
    """A tracker the spec names is installed (trackers are optional extras, imported only when asked)."""
    import importlib.util

    from platform.spec.trackers import TRACKERS

    for name in spec.tracking:
        tracker = TRACKERS[name]
        if importlib.util.find_spec(tracker.package) is None:
            raise SpecError(
                f"tracking.{name}: its client library ({tracker.package}) is not installed; {tracker.install}, "
                f"or remove tracking.{name}"
            )


def _check_study(study: StudySection, steps: int) -> None:
    from evaluators.tasks import UnknownTask, check_task_name

    if not study.rows:
        raise SpecError("study.rows: name at least one row (name: {recipe: ..., hyperparameter: value})")
    for name, values in study.rows.items():
        for key, value in values.items():
            where = f"study.rows.{name}.{key}"
            if key == "batch_size":
                raise SpecError(f"{where}: every row trains with train.batch_size (the rows differ in recipe only)")
            if key not in HP_FIELDS:
                raise SpecError(f"{where}: unknown hyperparameter; known: {', '.join(HP_FIELDS)}")
            check_hyperparameter(key, value, where)
    if not study.table:
        raise SpecError("study.table: name at least one task and its metrics (e.g. {r8-fewshot: [macro_f1]})")
    for task, metrics in study.table.items():
        try:
            check_task_name(task)
        except UnknownTask as err:
            raise SpecError(f"study.table: {err.args[0]}") from None
        if not metrics:
            raise SpecError(f"study.table.{task}: name the metrics to show (e.g. [main])")
    if not study.seeds or len(set(study.seeds)) != len(study.seeds):
        raise SpecError(f"study.seeds: give one or more distinct seeds, got {study.seeds}")
    if study.tune_best > len(study.rows):
        raise SpecError(f"study.tune_best ({study.tune_best}) exceeds the number of rows ({len(study.rows)})")
    if steps % study.rounds:
        raise SpecError(
            f"study.rounds ({study.rounds}) must divide train.steps ({steps}) so the rounds are evenly spaced; "
            "change either (a profile may set its own steps)"
        )


def _check_warm_start(search: SearchSection) -> None:
    """Each warm-start point names only searched hyperparameters, with values their distributions
    can draw, and only ones whose ``when`` condition the point itself satisfies."""
    for i, point in enumerate(search.warm_start):
        where = f"search.warm_start[{i}]"
        for name, value in point.items():
            if name not in search.space:
                raise SpecError(
                    f"{where}.{name}: not a searched hyperparameter (searched: {', '.join(search.space) or 'none'}); "
                    "fixed values go in hyperparameters"
                )
            dist = search.space[name]
            if dist.kind == "choice":
                if value not in dist.values:
                    raise SpecError(f"{where}.{name}: {value!r} is not one of the choices {list(dist.values)}")
            elif (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not (dist.values[0] <= value <= dist.values[1])
            ):
                raise SpecError(f"{where}.{name}: {value!r} is outside the searched range {list(dist.values)}")
            elif dist.kind == "int" and not isinstance(value, int):
                raise SpecError(f"{where}.{name}: expected an integer, got {value!r}")
            if not dist.applies(point):
                raise SpecError(f"{where}.{name}: its condition {dict(dist.when)} does not hold in this point")


def workers_checked(spec: SearchSpec) -> int:
    """The worker count the checks hold the batch to: ``auto`` is fitted to the cluster later, to a
    count that divides every batch size (``platform.search_path.settling.fit_to_cluster``), so 1 here."""
    return 1 if spec.train.workers == "auto" else spec.train.workers


def values_of(spec: SearchSpec, name: str) -> tuple:
    """Every value hyperparameter ``name`` can take in this search."""
    if name in spec.search.space and spec.search.space[name].kind == "choice":
        return spec.search.space[name].values
    return (getattr(spec.fixed_hyperparameters(), name),) if name not in spec.search.space else ()


def losses_of(spec: SearchSpec) -> list[str]:
    """Every contrastive loss this search's trials may train with."""
    searched = spec.search.space.get("loss")
    losses = list(searched.values) if searched else []
    if not searched or searched.when:  # a trial that draws none keeps the fixed one, unset: its recipe's own
        fixed = spec.fixed_hyperparameters().loss
        losses += [fixed] if fixed else [recipe_loss(recipe) for recipe in spec.recipes()]
    return list(dict.fromkeys(losses))


def _check_recipe_needs(spec: SearchSpec) -> None:
    """Combinations that cannot train, refused before anything starts."""
    if "back_translation" in values_of(spec, "augmentation"):
        from trainers.augment.back_translation import parse_model_pair

        try:
            parse_model_pair(spec.fixed_hyperparameters().translation_models)
        except ValueError as err:
            raise SpecError(f"hyperparameters.translation_models: {err}") from None
    if spec.backbone.longformer is None and set(values_of(spec, "trainable")) - {"all"}:
        raise SpecError(
            "trainable: positions and positions+top train the position rows a Longformer conversion adds, and this "
            "spec converts nothing; add backbone.longformer or train all parameters (trainable: all)"
        )
    if spec.backbone.longformer is None and "interpolate" in values_of(spec, "position_init"):
        raise SpecError(
            "position_init: interpolate re-fills the position rows a Longformer conversion adds, and this spec "
            "converts nothing; add backbone.longformer or keep position_init: copy"
        )
    if spec.backbone.longformer is None and any(values_of(spec, "skipped_positions")):
        raise SpecError(
            "skipped_positions: reads training views at the position rows a Longformer conversion adds, and this "
            "spec converts nothing; add backbone.longformer or keep skipped_positions: 0"
        )
    if spec.may_take_hard_negatives():
        refusing = [loss for loss in losses_of(spec) if not plugin_registries()["loss"][loss].takes_hard_negatives]
        if refusing:
            raise SpecError(
                f"hard_negatives: loss {', '.join(refusing)} takes no hard negatives (infonce does); set loss: infonce "
                "or keep hard_negatives at 0"
            )
    batch_sizes = values_of(spec, "batch_size") or (spec.train.batch_size,)
    per_worker = min(batch_sizes) // workers_checked(spec)
    for loss in losses_of(spec):
        needs = plugin_registries()["loss"][loss]
        if per_worker < needs.min_pairs_per_worker:
            raise SpecError(
                f"loss {loss} needs at least {needs.min_pairs_per_worker} pairs per worker; "
                f"train.batch_size {spec.train.batch_size} over {workers_checked(spec)} workers gives {per_worker}"
            )
        if min(batch_sizes) < needs.min_pairs:
            raise SpecError(
                f"loss {loss} needs at least {needs.min_pairs} pairs per step; train.batch_size is {min(batch_sizes)}"
            )
