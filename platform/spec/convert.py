"""YAML values checked against the schema's type hints and ranges and built into its dataclasses
(``build``), with one message per problem naming the key; the searched hyperparameters'
distributions too."""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from typing import Any, Literal

from platform.spec.schema import Distribution, SpecError, TrackerSettings
from trainers.settings import SETTINGS


def describe(value: Any) -> str:
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
        raise SpecError(f"{where}: expected {expected}, got {describe(value)}")
    if value is None:
        raise SpecError(f"{where}: a value is required, got null")
    if origin is Literal:
        if value not in args:
            raise SpecError(f"{where}: {value!r} is not one of {', '.join(map(repr, args))}")
        return value
    if hint is bool:
        if not isinstance(value, bool):
            raise SpecError(f"{where}: expected true or false, got {describe(value)}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise SpecError(f"{where}: expected an integer, got {describe(value)}")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise SpecError(f"{where}: expected a number, got {describe(value)}")
        return float(value)
    if hint is str:
        if not isinstance(value, str) or not value.strip():
            raise SpecError(f"{where}: expected a non-empty string, got {describe(value)}")
        return value
    if hint is Any:
        return value
    if hint is dict:  # an untyped mapping (profile overrides), validated where it is merged
        if not isinstance(value, dict):
            raise SpecError(f"{where}: expected a mapping, got {describe(value)}")
        return value
    if origin is dict:
        if not isinstance(value, dict):
            raise SpecError(f"{where}: expected a mapping, got {describe(value)}")
        key_type, value_type = args
        return {_convert(k, key_type, where): _convert(v, value_type, f"{where}.{k}") for k, v in value.items()}
    if origin is list:
        if not isinstance(value, list):
            raise SpecError(f"{where}: expected a list, got {describe(value)}")
        return [_convert(v, args[0], f"{where}[{i}]") for i, v in enumerate(value)]
    if hint is Distribution:
        return _distribution(value, where)
    if hint is TrackerSettings:
        return _tracker_settings(value, where)
    if dataclasses.is_dataclass(hint):
        return build(hint, value, where)
    raise TypeError(f"no conversion for {hint!r}")  # a bug in the schema, not in the spec


def build(cls: type, data: Any, where: str) -> Any:
    if not isinstance(data, dict):
        raise SpecError(f"{where or 'spec'}: expected a mapping, got {describe(data)}")
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


def _tracker_settings(value: Any, where: str) -> TrackerSettings:
    """``tracking:``: each registered tracker it names with its settings built into the class the
    tracker declares; a tracker set to null is off."""
    from platform.spec.trackers import TRACKERS

    if not isinstance(value, dict):
        raise SpecError(f"{where}: expected a mapping of tracker name -> its settings, got {describe(value)}")
    built = TrackerSettings()
    for name, settings in value.items():
        if name not in TRACKERS:
            raise SpecError(f"{_join(where, str(name))}: unknown tracker; known: {', '.join(TRACKERS.names())}")
        if settings is not None:
            built[name] = build(TRACKERS[name].settings, settings, _join(where, name))
    return built


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


HP_FIELDS = {name: setting.field for name, setting in SETTINGS.items()}


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


def plugin_registries() -> dict:
    """The hyperparameters that name a plug-in, and where those are registered. Imported when a spec
    is checked, not with this module: the losses bring torch, which importing ``platform.spec``
    (for its names and paths) does not need."""
    from trainers.losses import CONTRASTIVE_LOSSES
    from trainers.pairs import RECIPES, VIEWS

    return {"recipe": RECIPES, "loss": CONTRASTIVE_LOSSES, "views": VIEWS}


def check_hyperparameter(name: str, value: Any, where: str) -> Any:
    if name not in HP_FIELDS:
        raise SpecError(f"{where}: unknown hyperparameter; known: {', '.join(HP_FIELDS)}")
    value = _convert(value, SETTINGS[name].hint, where)
    registry = plugin_registries().get(name)
    if registry is not None and value is not None and value not in registry:
        raise SpecError(f"{where}: unknown {registry.kind} {value!r}; known: {', '.join(registry.names())}")
    if check := HP_FIELDS[name].metadata.get("check"):  # a plug-in's own rule for its setting
        try:
            check(value)
        except ValueError as err:
            raise SpecError(f"{where}: {err}") from None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        _check_range(value, HP_FIELDS[name].metadata, where)
    return value
