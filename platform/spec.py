"""Search specs: YAML validated once, at the edge, into typed objects.

``load_spec(path, profile)`` reads the YAML, merges the chosen profile's overrides (doctune's
built-in ones for ``local`` and ``smoke``, then the spec's own ``profiles:`` section), and
converts the result into a ``SearchSpec``. Every problem raises ``SpecError`` naming the key,
what was wrong and how to fix it; nothing is started before the spec is valid. Inner code only
ever sees the dataclasses below.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from trainers.config import BaseSettings, EvalBudget, Hyperparameters, constraint

PROFILES = ("full", "local", "smoke")
SPACES_DIR = Path(__file__).resolve().parent.parent / "search_spaces"

# What --profile local and smoke change in every spec before the spec's own profile section.
# local: about 15 minutes on 2 CPUs; smoke: a couple of minutes, for tests. Their `base` entries
# apply only to a spec that trains its base (has a base: section); they add none to another.
BUILTIN_PROFILES: dict[str, dict] = {
    "full": {},
    "local": {
        "train": {
            "steps": 40,
            "eval_every": 20,
            "max_length": 128,
            "batch_size": 8,
            "workers": 2,
            "cpus_per_worker": 0.5,
            "gpus_per_worker": 0.0,
            "bf16": False,
            # trials and evaluators share the same 2 cores here: scoring beside training slowed both
            # (bench/RESULTS.md, "Scoring overlapping training")
            "overlap_scoring": False,
        },
        "search": {"samples": 4},
        # a BERT-Mini at 256 tokens (evaluation's length here): see docs/decisions.md, "Base stage"
        "base": {
            "layers": 4,
            "hidden": 256,
            "heads": 4,
            "intermediate": 1024,
            "vocab_size": 8000,
            "max_length": 256,
            "steps": 1000,
            "batch_size": 16,
        },
        "evaluation": {
            "evaluators": 1,
            "cpus_per_evaluator": 0.5,
            "gpus_per_evaluator": 0.0,
            "threads": 2,
            "max_length": 256,
            "limits": {"max_documents": 200, "max_queries": 100, "max_test": 300, "fewshot_k": 8, "repeats": 3},
        },
    },
    "smoke": {
        "corpus": {"max_documents": 300},
        "train": {
            "steps": 4,
            "eval_every": 2,
            "max_length": 64,
            "batch_size": 4,
            "workers": 2,
            "cpus_per_worker": 0.5,
            "gpus_per_worker": 0.0,
            "bf16": False,
        },
        "search": {"samples": 2},
        "base": {
            "layers": 2,
            "hidden": 64,
            "heads": 2,
            "intermediate": 256,
            "vocab_size": 2000,
            "max_length": 128,
            "steps": 20,
            "batch_size": 8,
            "checkpoint_every": 20,
        },
        "evaluation": {
            "evaluators": 1,
            "cpus_per_evaluator": 0.5,
            "gpus_per_evaluator": 0.0,
            "threads": 2,
            "max_length": 128,
            "limits": {"max_documents": 60, "max_queries": 30, "max_test": 64, "fewshot_k": 4, "repeats": 2},
        },
    },
}


class SpecError(ValueError):
    """The spec is invalid; the message names the key and the fix."""


@dataclass(frozen=True)
class Distribution:
    """One searched dimension: ``{uniform: [lo, hi]}``, ``{loguniform: [lo, hi]}``,
    ``{int: [lo, hi]}`` (inclusive) or ``{choice: [v1, v2, ...]}``, optionally with
    ``when: {other: value-or-list}``: the dimension is sampled only in trials where every named
    earlier dimension took one of the listed values (no wasted dimensions)."""

    kind: Literal["uniform", "loguniform", "int", "choice"]
    values: tuple
    when: tuple[tuple[str, tuple], ...] = ()

    def applies(self, chosen: dict) -> bool:
        return all(name in chosen and chosen[name] in allowed for name, allowed in self.when)


@dataclass(frozen=True)
class CorpusSpec:
    source: str = field(
        default="news-articles",
        metadata=constraint(
            "'news-articles' (packaged), a .jsonl/.txt/.parquet file or a directory of .txt, or hf:<dataset id>"
        ),
    )
    max_documents: int | None = field(default=None, metadata=constraint("use at most this many documents", 1))


@dataclass(frozen=True)
class LongformerSpec:
    max_length: int = field(default=4096, metadata=constraint("positions of the converted model", 16, 65536))
    attention_window: int = field(default=256, metadata=constraint("sliding window (even), per layer", 2, 65536))


@dataclass(frozen=True)
class BackboneSpec:
    longformer: LongformerSpec | None = field(
        default=None,
        metadata=constraint(
            "convert base_model into a Longformer (position embeddings copied out, global Q/K/V from local)"
        ),
    )


@dataclass(frozen=True)
class ObjectiveSpec:
    tasks: dict[str, float] = field(
        default_factory=dict,
        metadata=constraint("task name -> weight: one objective, the weighted mean of the tasks' main scores"),
    )
    objectives: dict[str, dict[str, float]] = field(
        default_factory=dict,
        metadata=constraint(
            "instead of tasks: several named objectives (each task name -> weight), searched with NSGA-II "
            "for their Pareto front; the first ranks the leaderboard and picks best/"
        ),
    )

    def named(self) -> dict[str, dict[str, float]]:
        """Every objective by name (a single one is called ``objective``)."""
        return {name: dict(tasks) for name, tasks in self.objectives.items()} or {"objective": dict(self.tasks)}


@dataclass(frozen=True)
class AshaSpec:
    grace_period: int = field(default=1, metadata=constraint("evaluation rounds before a trial can be stopped", 1))
    reduction_factor: int = field(default=2, metadata=constraint("ASHA's halving rate", 2))


@dataclass(frozen=True)
class SchedulerSpec:
    asha: AshaSpec | None = field(default_factory=AshaSpec, metadata=constraint("null to run every trial to the end"))


@dataclass(frozen=True)
class SearchSection:
    objective: ObjectiveSpec = field(metadata=constraint("what the search maximises"))
    samples: int = field(default=16, metadata=constraint("number of trials", 1))
    sampler: Literal["tpe", "random", "grid"] = field(
        default="tpe",
        metadata=constraint(
            "tpe (random start-up of a quarter of the samples, at least 2, at most 10; then model-guided), random, "
            "or grid (every choice x grid_points values per numeric range); several objectives always use NSGA-II"
        ),
    )
    seed: int = field(default=0, metadata=constraint("seed of the sampler"))
    multivariate: bool = field(
        default=True, metadata=constraint("tpe: model the dimensions jointly (false: one density per dimension)")
    )
    grid_points: int = field(
        default=3, metadata=constraint("grid: values per numeric range (geometric for loguniform)", 2)
    )
    confirm_seeds: int = field(
        default=0,
        metadata=constraint(
            "after the search, train the winner's configuration with this many more seeds and report mean +- std", 0
        ),
    )
    scheduler: SchedulerSpec = field(default_factory=SchedulerSpec, metadata=constraint("early stopping"))
    space: dict[str, Distribution] = field(default_factory=dict, metadata=constraint("searched hyperparameters"))
    max_concurrent: int | None = field(default=None, metadata=constraint("cap on trials at once", 1))
    warm_start: list[dict[str, Any]] = field(
        default_factory=list,
        metadata=constraint("configurations the first trials run (searched name -> value), e.g. papers' defaults"),
    )


@dataclass(frozen=True)
class TrainSection:
    steps: int = field(default=2000, metadata=constraint("optimizer steps per trial", 1))
    eval_every: int = field(default=250, metadata=constraint("steps between checkpoints (each is scored)", 1))
    batch_size: int = field(default=36, metadata=constraint("pairs per step across all workers (unless searched)", 1))
    max_length: int = field(default=512, metadata=constraint("tokens per view", 8))
    workers: int = field(default=2, metadata=constraint("data-parallel workers per trial", 1))
    cpus_per_worker: float = field(default=4.0, metadata=constraint("CPUs each worker holds", 0.0, low_open=True))
    gpus_per_worker: float = field(default=1.0, metadata=constraint("GPUs each worker holds (0: CPU training)", 0.0))
    bf16: bool = field(default=True, metadata=constraint("bf16 autocast on GPU"))
    seed: int = field(default=0, metadata=constraint("training seed"))
    max_worker_failures: int = field(default=2, metadata=constraint("worker-group restarts per trial", 0))
    gradient_checkpointing: bool = field(
        default=False,
        metadata=constraint("recompute activations in backward (less memory, about a third more compute)"),
    )
    chunk_size: int | Literal["auto"] | None = field(
        default=None,
        metadata=constraint(
            "cached contrastive loss (GradCache): encode at most this many sequences at once; exact gradients, "
            "memory bounded by the chunk, not the batch; auto: each worker measures the largest chunk that fits",
            1,
        ),
    )
    overlap_scoring: bool = field(
        default=True,
        metadata=constraint(
            "train on while the evaluators score a round (its scores reach the search at the first step after they "
            "arrive, rounds in order); false: training waits for each round's scores"
        ),
    )
    keep_checkpoints: Literal["best", "all"] = field(
        default="best",
        metadata=constraint(
            "what an ended trial keeps: best (the weights of the round its leaderboard row shows, so every row "
            "and the Pareto front stay exportable; the other rounds keep their scores) or all (every round's "
            "weights); training state stays only where a resume can need it"
        ),
    )
    fault_nan_at_step: int | None = field(
        default=None,
        metadata=constraint("fault injection for testing: the training loss becomes NaN at this step", 0),
    )


@dataclass(frozen=True)
class EvaluationSection:
    evaluators: int = field(default=2, metadata=constraint("evaluator actors", 1))
    cpus_per_evaluator: float = field(default=2.0, metadata=constraint("CPUs each evaluator holds", 0.0, low_open=True))
    gpus_per_evaluator: float = field(default=0.0, metadata=constraint("GPUs each evaluator holds", 0.0))
    threads: int = field(default=2, metadata=constraint("torch threads per evaluator", 1))
    max_length: int = field(default=512, metadata=constraint("tokens per text when embedding", 8))
    batch_size: int = field(default=32, metadata=constraint("texts per embedding batch", 1))
    limits: EvalBudget = field(default_factory=EvalBudget, metadata=constraint("how much task data to use"))
    report_tasks: list[str] = field(default_factory=list, metadata=constraint("scored for the report, never steer"))


@dataclass(frozen=True)
class StudySection:
    """A recipe study (``python -m platform.study``): named rows of fixed hyperparameters, each
    trained once per seed from the same base, scored on the table's tasks."""

    rows: dict[str, dict[str, Any]] = field(
        metadata=constraint("row name -> its recipe and hyperparameters (a paper's defaults)")
    )
    table: dict[str, list[str]] = field(metadata=constraint("the table's columns: task -> the metrics shown"))
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2], metadata=constraint("each row trains once per seed"))
    tune_best: int = field(
        default=2, metadata=constraint("how many of the best rows (by the objective) the search then tunes", 0)
    )


@dataclass(frozen=True)
class SearchSpec:
    name: str = field(metadata=constraint("the search's name (run directory, Tune experiment)"))
    search: SearchSection = field(metadata=constraint("objective, sampler, scheduler and search space"))
    base_model: str = field(
        default="all-minilm-l6-v2",
        metadata=constraint(
            "packaged alias, local model directory, or Hugging Face id; with base: set, the trained base's label"
        ),
    )
    base: BaseSettings | None = field(
        default=None,
        metadata=constraint(
            "instead of base_model: train a vanilla (MLM-only) BERT and its WordPiece vocabulary from scratch on "
            "the corpus before the search, cached by corpus content and settings; the local and smoke profiles "
            "shrink it"
        ),
    )
    backbone: BackboneSpec = field(default_factory=BackboneSpec, metadata=constraint("encoder architecture changes"))
    corpus: CorpusSpec = field(default_factory=CorpusSpec, metadata=constraint("pretraining text"))
    recipe: str = field(default="docsplit", metadata=constraint("positive-pair recipe, unless searched"))
    hyperparameters: dict[str, Any] = field(
        default_factory=dict, metadata=constraint("fixed values for hyperparameters that are not searched")
    )
    train: TrainSection = field(default_factory=TrainSection, metadata=constraint("trial training"))
    evaluation: EvaluationSection = field(default_factory=EvaluationSection, metadata=constraint("scoring"))
    address: str | None = field(default=None, metadata=constraint("Ray address; default RAY_ADDRESS or local"))
    study: StudySection | None = field(
        default=None, metadata=constraint("rows, seeds and table of a recipe study (python -m platform.study)")
    )
    profiles: dict[str, dict] = field(default_factory=dict, metadata=constraint("per-profile overrides"))

    def fixed_hyperparameters(self) -> Hyperparameters:
        values = {**self.hyperparameters, "batch_size": self.train.batch_size, "recipe": self.recipe}
        return Hyperparameters(**{k: v for k, v in values.items() if k not in self.search.space})


# ---------------------------------------------------------------------------------------------
# Conversion of raw YAML data into the dataclasses above.


def _describe(value: Any) -> str:
    return f"{value!r} ({type(value).__name__})"


def _check_range(value: float, meta: dict, where: str) -> None:
    low, high = meta.get("low"), meta.get("high")
    if low is not None and (value < low or (meta.get("low_open") and value == low)):
        bound = ">" if meta.get("low_open") else ">="
        raise SpecError(f"{where}: {value!r} is out of range; it must be {bound} {low}")
    if high is not None and (value > high or (meta.get("high_open") and value == high)):
        bound = "<" if meta.get("high_open") else "<="
        raise SpecError(f"{where}: {value!r} is out of range; it must be {bound} {high}")


def _convert(value: Any, hint: Any, where: str) -> Any:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        if len(inner) == 1:
            return _convert(value, inner[0], where)
        for alternative in inner:  # e.g. int | Literal["auto"]: the first that accepts the value
            try:
                return _convert(value, alternative, where)
            except SpecError:
                continue
        accepted = [
            " or ".join(map(repr, typing.get_args(a))) if typing.get_origin(a) is Literal else a.__name__ for a in args
        ]
        expected = " or ".join(accepted).replace("NoneType", "null")
        raise SpecError(f"{where}: expected {expected}, got {_describe(value)}")
    if value is None:
        raise SpecError(f"{where}: a value is required, got null")
    if origin is Literal:
        if value not in args:
            raise SpecError(f"{where}: {value!r} is not one of {', '.join(map(repr, args))}")
        return value
    if hint is bool:
        if not isinstance(value, bool):
            raise SpecError(f"{where}: expected true or false, got {_describe(value)}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise SpecError(f"{where}: expected an integer, got {_describe(value)}")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise SpecError(f"{where}: expected a number, got {_describe(value)}")
        return float(value)
    if hint is str:
        if not isinstance(value, str) or not value.strip():
            raise SpecError(f"{where}: expected a non-empty string, got {_describe(value)}")
        return value
    if hint is Any:
        return value
    if hint is dict:  # an untyped mapping (profile overrides), validated where it is merged
        if not isinstance(value, dict):
            raise SpecError(f"{where}: expected a mapping, got {_describe(value)}")
        return value
    if origin is dict:
        if not isinstance(value, dict):
            raise SpecError(f"{where}: expected a mapping, got {_describe(value)}")
        key_type, value_type = args
        return {_convert(k, key_type, where): _convert(v, value_type, f"{where}.{k}") for k, v in value.items()}
    if origin is list:
        if not isinstance(value, list):
            raise SpecError(f"{where}: expected a list, got {_describe(value)}")
        return [_convert(v, args[0], f"{where}[{i}]") for i, v in enumerate(value)]
    if hint is Distribution:
        return _distribution(value, where)
    if dataclasses.is_dataclass(hint):
        return _build(hint, value, where)
    raise TypeError(f"no conversion for {hint!r}")  # a bug in the schema, not in the spec


def _build(cls: type, data: Any, where: str) -> Any:
    if not isinstance(data, dict):
        raise SpecError(f"{where or 'spec'}: expected a mapping, got {_describe(data)}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise SpecError(f"{_join(where, unknown[0])}: unknown key; allowed here: {', '.join(sorted(fields))}")
    hints = typing.get_type_hints(cls)
    values = {}
    for name, spec_field in fields.items():
        key = _join(where, name)
        if name not in data:
            if spec_field.default is dataclasses.MISSING and spec_field.default_factory is dataclasses.MISSING:
                raise SpecError(f"{key}: required key is missing ({spec_field.metadata.get('help', '')})")
            continue
        value = _convert(data[name], hints[name], key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and spec_field.metadata:
            _check_range(value, spec_field.metadata, key)
        values[name] = value
    return cls(**values)


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


HP_FIELDS = {f.name: f for f in dataclasses.fields(Hyperparameters)}
HP_HINTS = typing.get_type_hints(Hyperparameters)


def _distribution(value: Any, where: str) -> Distribution:
    kinds = ("uniform", "loguniform", "int", "choice")
    body = {k: v for k, v in value.items() if k != "when"} if isinstance(value, dict) else None
    if body is None or len(body) != 1 or next(iter(body)) not in kinds:
        raise SpecError(
            f"{where}: expected one of {{uniform: [lo, hi]}}, {{loguniform: [lo, hi]}}, "
            f"{{int: [lo, hi]}}, {{choice: [...]}} (optionally with when: {{name: values}}); got {value!r}"
        )
    when = value.get("when", {})
    if "when" in value and (not isinstance(when, dict) or not when):
        raise SpecError(f"{where}.when: expected a mapping of an earlier searched name to its value(s), got {when!r}")
    conditions = tuple((k, tuple(v) if isinstance(v, list) else (v,)) for k, v in when.items())
    kind, values = next(iter(body.items()))
    if not isinstance(values, list) or not values:
        raise SpecError(f"{where}.{kind}: expected a non-empty list, got {values!r}")
    if kind == "choice":
        return Distribution(kind, tuple(values), conditions)
    if len(values) != 2:
        raise SpecError(f"{where}.{kind}: expected [lo, hi], got {values!r}")
    number = int if kind == "int" else float
    lo, hi = (_convert(v, number, f"{where}.{kind}") for v in values)
    if not lo < hi:
        raise SpecError(f"{where}.{kind}: empty or inverted range [{lo}, {hi}]; write [low, high] with low < high")
    if kind == "loguniform" and lo <= 0:
        raise SpecError(f"{where}.loguniform: bounds must be > 0, got [{lo}, {hi}]")
    return Distribution(kind, (lo, hi), conditions)


def _check_hyperparameter(name: str, value: Any, where: str) -> Any:
    if name not in HP_FIELDS:
        raise SpecError(f"{where}: unknown hyperparameter; known: {', '.join(HP_FIELDS)}")
    value = _convert(value, HP_HINTS[name], where)
    if name == "recipe":
        from trainers.pairs import recipes

        if value not in recipes():
            raise SpecError(f"{where}: unknown recipe {value!r}; known: {', '.join(recipes())}")
    if name == "augmentation":
        from trainers.augment.word_level import AugmentationUnavailable, check_augmentation

        try:
            check_augmentation(value)
        except AugmentationUnavailable as err:
            raise SpecError(f"{where}: {err}") from None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        _check_range(value, HP_FIELDS[name].metadata, where)
    return value


def _deep_merge(base: dict, override: dict) -> dict:
    merged = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def find_spec_file(name_or_path: str) -> Path:
    """A path as given, else a spec in ``search_spaces/`` by name, with or without ``.yaml``."""
    path = Path(name_or_path).expanduser()
    if path.is_file():
        return path
    for candidate in (SPACES_DIR / name_or_path, SPACES_DIR / f"{name_or_path}.yaml"):
        if candidate.is_file():
            return candidate
    known = ", ".join(sorted(p.stem for p in SPACES_DIR.glob("*.yaml")))
    raise SpecError(f"spec {name_or_path!r} not found: not a file, nor a spec in search_spaces/ ({known})")


def read_raw(path: Path) -> dict:
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise SpecError(f"{path}: malformed YAML{at}: {getattr(err, 'problem', err)}") from None
    except UnicodeDecodeError:
        raise SpecError(f"{path}: not UTF-8 text") from None
    if not isinstance(raw, dict):
        raise SpecError(f"{path}: a spec is a YAML mapping of keys (name, search, train, ...), got {_describe(raw)}")
    return raw


def parse_spec(raw: dict, profile: str) -> SearchSpec:
    """Validate ``raw`` with ``profile``'s overrides; every profile's overrides are checked too."""
    overrides = raw.get("profiles", {})
    if not isinstance(overrides, dict) or any(not isinstance(v, dict) for v in overrides.values()):
        raise SpecError("profiles: expected a mapping of profile name -> overrides mapping")
    unknown = sorted(set(overrides) - set(PROFILES))
    if unknown:
        raise SpecError(f"profiles.{unknown[0]}: unknown profile; profiles are {', '.join(PROFILES)}")
    if "profiles" in {k for o in overrides.values() for k in o}:
        raise SpecError("profiles: a profile cannot contain profiles")
    _build(SearchSpec, raw, "")  # errors in the spec itself are reported without a profile
    _check_model_choice(raw, "")
    specs = {}
    for name in PROFILES:
        builtin = BUILTIN_PROFILES[name]
        if raw.get("base") is None:  # the built-in base sizes shrink a base the spec trains; they add none
            builtin = {k: v for k, v in builtin.items() if k != "base"}
        override = overrides.get(name, {})
        merged = _deep_merge(_deep_merge(raw, builtin), override)
        try:
            _check_model_choice(override, f"profiles.{name}.")
            if merged.get("base") is not None and "base_model" in merged:
                if "base_model" in override:
                    raise SpecError(
                        f"profiles.{name}.base_model: the spec trains its base (base:); add base: null to this "
                        "profile to use base_model instead"
                    )
                del merged["base_model"]  # the profile's base: replaces the spec's base_model
            spec = _build(SearchSpec, merged, "")
            specs[name] = spec if spec.base is None else dataclasses.replace(spec, base_model=spec.base.label)
            _check_semantics(specs[name])
        except SpecError as err:
            if name == "full" and name not in overrides:
                raise
            raise SpecError(f"{err} (in the overrides of profile {name!r})") from None
    return specs[profile]


def _check_model_choice(layer: dict, where: str) -> None:
    """One layer of a spec (the spec itself, or one profile's overrides) names one base encoder."""
    if layer.get("base") is not None and "base_model" in layer:
        raise SpecError(
            f"{where}base_model: give either base_model (an existing encoder) or base: (one trained from scratch "
            "here), not both"
        )


def _check_base(spec: SearchSpec) -> None:
    """A trained base must fit the trials: heads that divide the hidden size, a batch the workers
    share equally, and positions for every token the trials and evaluators feed it."""
    base = spec.base
    if base is None:
        return
    if base.hidden % base.heads:
        raise SpecError(f"base.heads: base.hidden ({base.hidden}) must be a multiple of base.heads ({base.heads})")
    if base.batch_size % spec.train.workers:
        raise SpecError(
            f"base.batch_size ({base.batch_size}) must be a multiple of train.workers ({spec.train.workers}): "
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


def _check_semantics(spec: SearchSpec) -> None:
    """What a single key's type cannot say: names that must exist, keys that must agree."""
    from evaluators.tasks import UnknownTask, check_task_name

    for key, value in spec.hyperparameters.items():
        if key in ("recipe", "batch_size"):
            raise SpecError(
                f"hyperparameters.{key}: set it with the top-level `{key}` key (or search it)"
                if key == "recipe"
                else "hyperparameters.batch_size: set it with train.batch_size"
            )
        _check_hyperparameter(key, value, f"hyperparameters.{key}")
    _check_hyperparameter("recipe", spec.recipe, "recipe")
    earlier: dict[str, Distribution] = {}
    for key, dist in spec.search.space.items():
        where = f"search.space.{key}"
        if key not in HP_FIELDS:
            raise SpecError(f"{where}: unknown hyperparameter; searchable: {', '.join(HP_FIELDS)}")
        for value in dist.values:
            _check_hyperparameter(key, value, f"{where}.{dist.kind}")
        if key == "batch_size" and any(v % spec.train.workers for v in dist.values):
            raise SpecError(f"{where}: every batch size must be a multiple of train.workers ({spec.train.workers})")
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
    _check_recipe_needs(spec)
    _check_base(spec)
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
    if spec.train.batch_size % spec.train.workers and "batch_size" not in spec.search.space:
        raise SpecError(
            f"train.batch_size ({spec.train.batch_size}) must be a multiple of train.workers "
            f"({spec.train.workers}): each worker takes an equal share"
        )
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
    _check_warm_start(spec.search)
    _check_grid(spec.search)
    if spec.study is not None:
        _check_study(spec.study)


def _check_grid(search: SearchSection) -> None:
    """A grid search needs a space every point of which is a distinct configuration, and no more
    samples than points."""
    from platform.samplers import grid_size

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
    conditional = [name for name, dist in search.space.items() if dist.when]
    if conditional:
        raise SpecError(
            f"search.space.{conditional[0]}.when: a grid search takes every combination of values, so conditional "
            "dimensions would repeat configurations; drop the conditions or use sampler: tpe or random"
        )
    points = grid_size(search.space, search.grid_points)
    if search.samples > points:
        raise SpecError(
            f"search.samples ({search.samples}) exceeds the grid's {points} points (choices x {search.grid_points} "
            f"values per numeric range); set samples to at most {points} or raise search.grid_points"
        )


def _check_study(study: StudySection) -> None:
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
            _check_hyperparameter(key, value, where)
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


def _values(spec: SearchSpec, name: str) -> tuple:
    """Every value hyperparameter ``name`` can take in this search."""
    if name in spec.search.space and spec.search.space[name].kind == "choice":
        return spec.search.space[name].values
    return (getattr(spec.fixed_hyperparameters(), name),) if name not in spec.search.space else ()


def _check_recipe_needs(spec: SearchSpec) -> None:
    """Combinations that cannot train, refused before anything starts."""
    if "back_translation" in _values(spec, "augmentation"):
        from trainers.augment.back_translation import parse_model_pair

        try:
            parse_model_pair(spec.fixed_hyperparameters().translation_models)
        except ValueError as err:
            raise SpecError(f"hyperparameters.translation_models: {err}") from None
    per_worker = [b // spec.train.workers for b in (_values(spec, "batch_size") or (spec.train.batch_size,))]
    if "simsiam" in _values(spec, "loss") and min(per_worker) < 2:
        raise SpecError(
            f"loss simsiam needs at least 2 pairs per worker (batch norm in its predictor); "
            f"train.batch_size {spec.train.batch_size} over {spec.train.workers} workers gives "
            f"{min(per_worker)}"
        )


def load_spec(name_or_path: str, profile: str) -> tuple[SearchSpec, Path]:
    path = find_spec_file(name_or_path)
    return parse_spec(read_raw(path), profile), path
