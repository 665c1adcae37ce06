"""Render the spec schema (the dataclasses in ``platform.spec``) as Markdown.

``python -m platform.spec.docs > docs/spec.md`` regenerates the reference; a test keeps the
file equal to this output, so the documentation cannot drift from the schema.
"""

from __future__ import annotations

import dataclasses
import types
import typing

from doctune_core.run_layout import SEARCH_RECORD
from platform.spec import BUILTIN_PROFILES, Distribution, SearchSpec
from platform.spec.schema import TrackerSettings
from platform.spec.trackers import TRACKERS
from trainers.settings import SETTINGS


def type_name(hint) -> str:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Literal:
        return " \\| ".join(repr(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " \\| ".join("null" if a is type(None) else type_name(a) for a in args)
    if origin is dict:
        return f"mapping {type_name(args[0])} → {type_name(args[1])}"
    if origin is list:
        return f"list of {type_name(args[0])}"
    if hint is Distribution:
        return "distribution"
    if hint is TrackerSettings:
        return "mapping tracker → its settings (below)"
    if dataclasses.is_dataclass(hint):
        return "mapping (below)"
    return getattr(hint, "__name__", str(hint))


def _default(field: dataclasses.Field) -> str:
    if field.default is not dataclasses.MISSING:
        return f"`{field.default!r}`"
    if field.default_factory is not dataclasses.MISSING:
        value = field.default_factory()
        return "(below)" if dataclasses.is_dataclass(value) else f"`{value!r}`"
    return "**required**"


def _range(meta: dict) -> str:
    low, high = meta.get("low"), meta.get("high")
    parts = []
    if low is not None:
        parts.append(f"{'>' if meta.get('low_open') else '≥'} {low:g}")
    if high is not None:
        parts.append(f"{'<' if meta.get('high_open') else '≤'} {high:g}")
    return ", ".join(parts)


def _section(cls, prefix: str, out: list[str], intro: str = "") -> None:
    hints = typing.get_type_hints(cls)
    nested = []
    out.append(f"\n### `{prefix or 'top level'}`\n")
    if intro:
        out += [intro, ""]
    out.append("| key | type | default | valid | meaning |")
    out.append("|---|---|---|---|---|")
    for field in dataclasses.fields(cls):
        hint = hints[field.name]
        key = f"{prefix}.{field.name}" if prefix else field.name
        meta = field.metadata or {}
        out.append(f"| `{key}` | {type_name(hint)} | {_default(field)} | {_range(meta)} | {meta.get('help', '')} |")
        inner = [a for a in (hint, *typing.get_args(hint)) if dataclasses.is_dataclass(a)]
        if inner:
            nested.append((key, inner[0], ""))
        if hint is TrackerSettings:  # each tracker's own settings, introduced by its settings class
            nested += [(f"{key}.{name}", TRACKERS[name].settings, _doc(TRACKERS[name].settings)) for name in TRACKERS]
    for key, inner, intro in nested:
        _section(inner, key, out, intro)


def _doc(cls) -> str:
    return " ".join((cls.__doc__ or "").split())


def render() -> str:
    out = [
        "# Spec reference",
        "",
        "Generated from the schema by `python -m platform.spec.docs`; a test keeps this file in step.",
        "A spec is YAML. Unknown keys, wrong types, out-of-range values and empty or inverted ranges",
        "are refused with a message naming the key (exit code 2) before anything starts.",
    ]
    _section(SearchSpec, "", out)
    out += [
        "",
        "## Hyperparameters",
        "",
        "Fixed under `hyperparameters:` or searched under `search.space:` (a distribution:",
        "`{uniform: [lo, hi]}`, `{loguniform: [lo, hi]}`, `{int: [lo, hi]}` inclusive, `{choice: [...]}`).",
        "`batch_size` is set by `train.batch_size` unless searched. The first ones every trial reads;",
        "the rest are a recipe's, a loss's or the Bregman term's own (`read by`), declared in its module",
        "(docs/plugins.md); a trial that does not use their owner ignores them.",
        "",
        "| name | read by | type | default | valid | meaning |",
        "|---|---|---|---|---|---|",
    ]
    for name, setting in SETTINGS.items():
        field = setting.field
        out.append(
            f"| `{name}` | {', '.join(setting.owners) or 'every trial'} | {type_name(setting.hint)} "
            f"| `{field.default!r}` | {_range(field.metadata)} | {field.metadata.get('help', '')} |"
        )
    out += [
        "",
        "## Profiles",
        "",
        "`--profile local` and `--profile smoke` first apply these built-in overrides, then the spec's own",
        "`profiles.<name>` section; `full` applies only the spec's own. A search says, once, which values",
        f"the spec sets itself that the built-in overrides replaced (terminal, `{SEARCH_RECORD}`'s",
        "`profile_replaced`, the report); to keep a value under a profile, set it in the spec's own",
        "`profiles.<name>` section.",
        "",
    ]
    for name, overrides in BUILTIN_PROFILES.items():
        if overrides:
            out.append(f"- `{name}`: `{overrides}`")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    print(render(), end="")
