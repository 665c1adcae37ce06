"""Search specs: YAML validated once, at the edge, into typed objects.

``load_spec(path, profile)`` reads the YAML, merges the chosen profile's overrides (doctune's
built-in ones, ``search_spaces/profiles/<profile>.yaml``, then the spec's own ``profiles:``
section), and
converts the result into a ``SearchSpec``. Every problem raises ``SpecError`` naming the key,
what was wrong and how to fix it; nothing is started before the spec is valid. Inner code only
ever sees the dataclasses below.

The schema is ``platform.spec.schema``, the typed conversion ``platform.spec.convert``, the checks
across fields ``platform.spec.checks``.
"""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

import yaml

from doctune_core.fields import leaves
from platform.spec.checks import check_model_choice, check_semantics, check_views_choice
from platform.spec.convert import HP_FIELDS, build, describe
from platform.spec.schema import Distribution, SearchSpec, SpecError

PROFILES = ("full", "local", "smoke")
SPACES_DIR = Path(__file__).resolve().parent.parent.parent / "search_spaces"
# what each --profile changes in every spec before the spec's own profiles: section
BUILTIN_PROFILES: dict[str, dict] = {
    name: yaml.safe_load((SPACES_DIR / "profiles" / f"{name}.yaml").read_text(encoding="utf-8")) for name in PROFILES
}

__all__ = [
    "BUILTIN_PROFILES",
    "HP_FIELDS",
    "PROFILES",
    "SPACES_DIR",
    "Distribution",
    "Replacement",
    "SearchSpec",
    "SpecError",
    "find_spec_file",
    "leaves",
    "load_spec",
    "parse_profiles",
    "parse_spec",
    "profile_replacements",
    "read_raw",
    "write_variant",
]


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


def write_variant(spec: str, directory: Path, changes: dict[str, object], profiles: tuple[str, ...] = PROFILES) -> Path:
    """The spec ``spec`` (a file, or a shipped spec's name) with ``changes`` applied, written to
    ``directory`` under the spec's file name; its path. ``changes`` maps dotted keys to values
    (``{"train.steps": 6, "search.samples": 1}``) and is applied to the spec and to its own section for
    each of ``profiles`` (so neither a built-in profile nor the spec's own undoes it), as a benchmark
    or a test varies a shipped spec."""
    raw = copy.deepcopy(read_raw(find_spec_file(spec)))
    sections = [raw, *(raw.setdefault("profiles", {}).setdefault(name, {}) for name in profiles)]
    for key, value in changes.items():
        *parents, last = key.split(".")
        for node in sections:
            for parent in parents:
                node = node.setdefault(parent, {})
            node[last] = copy.deepcopy(value)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / find_spec_file(spec).name
    path.write_text(yaml.safe_dump(raw, sort_keys=False))  # search.space order carries meaning (when:)
    return path


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
        raise SpecError(f"{path}: a spec is a YAML mapping of keys (name, search, train, ...), got {describe(raw)}")
    return raw


@dataclasses.dataclass(frozen=True)
class Replacement:
    """A value the spec sets itself that a profile's built-in overrides replaced."""

    key: str  # dotted, e.g. train.steps
    spec: object
    profile: object

    def describe(self) -> str:
        return f"{self.key} {self.spec!r} → {self.profile!r}"


def profile_replacements(raw: dict, profile: str) -> list[Replacement]:
    """What ``profile``'s built-in overrides change among the values the spec sets explicitly. The
    spec's own ``profiles.<profile>`` section is the user's word: a key it sets replaces nothing
    (that section is how a spec keeps its numbers under a profile)."""
    spec_values = leaves({k: v for k, v in raw.items() if k != "profiles"})
    own = leaves(raw.get("profiles", {}).get(profile, {}))
    return [
        Replacement(key, spec_values[key], value)
        for key, value in leaves(_builtin_overrides(raw, profile)).items()
        if key in spec_values and key not in own and spec_values[key] != value
    ]


def _builtin_overrides(raw: dict, profile: str) -> dict:
    """The built-in overrides ``profile`` applies to ``raw``: the base sizes only where it trains a base."""
    builtin = BUILTIN_PROFILES[profile]
    if raw.get("base") is None:  # the built-in base sizes shrink a base the spec trains; they add none
        builtin = {k: v for k, v in builtin.items() if k != "base"}
    return builtin


def parse_spec(raw: dict, profile: str) -> SearchSpec:
    """Validate ``raw`` with ``profile``'s overrides; every profile's overrides are checked too."""
    return parse_profiles(raw)[profile]


def parse_profiles(raw: dict) -> dict[str, SearchSpec]:
    """Validate ``raw`` under every profile: profile name -> the spec with its overrides."""
    overrides = raw.get("profiles", {})
    if not isinstance(overrides, dict) or any(not isinstance(v, dict) for v in overrides.values()):
        raise SpecError("profiles: expected a mapping of profile name -> overrides mapping")
    unknown = sorted(set(overrides) - set(PROFILES))
    if unknown:
        raise SpecError(f"profiles.{unknown[0]}: unknown profile; profiles are {', '.join(PROFILES)}")
    if "profiles" in {k for o in overrides.values() for k in o}:
        raise SpecError("profiles: a profile cannot contain profiles")
    build(SearchSpec, raw, "")  # errors in the spec itself are reported without a profile
    check_model_choice(raw, "")
    specs = {}
    for name in PROFILES:
        override = overrides.get(name, {})
        merged = _deep_merge(_deep_merge(raw, _builtin_overrides(raw, name)), override)
        try:
            check_model_choice(override, f"profiles.{name}.")
            if merged.get("base") is not None and "base_model" in merged:
                if "base_model" in override:
                    raise SpecError(
                        f"profiles.{name}.base_model: the spec trains its base (base:); add base: null to this "
                        "profile to use base_model instead"
                    )
                del merged["base_model"]  # the profile's base: replaces the spec's base_model
            spec = build(SearchSpec, merged, "")
            check_views_choice(merged)
            specs[name] = spec if spec.base is None else dataclasses.replace(spec, base_model=spec.base.label)
            check_semantics(specs[name])
        except SpecError as err:
            if name == "full" and name not in overrides:
                raise
            raise SpecError(f"{err} (in the overrides of profile {name!r})") from None
    return specs


def load_spec(name_or_path: str, profile: str) -> tuple[SearchSpec, Path]:
    path = find_spec_file(name_or_path)
    return parse_spec(read_raw(path), profile), path
