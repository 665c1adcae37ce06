"""Spec validation: every bad spec gets one message naming the key, and exit code 2."""

from __future__ import annotations

import copy
import dataclasses
import subprocess
import sys

import pytest
import yaml

from platform.spec import (
    PROFILES,
    SPACES_DIR,
    SpecError,
    find_spec_file,
    load_spec,
    parse_profiles,
    parse_spec,
    profile_replacements,
    read_raw,
    write_variant,
)
from tests.conftest import ROOT
from trainers.config import BaseSettings

GOOD = {
    "name": "t",
    "search": {
        "objective": {"tasks": {"news-title-retrieval": 1.0}},
        "space": {"temperature": {"loguniform": [0.02, 0.2]}, "pooling": {"choice": ["cls", "mean"]}},
    },
    "train": {"steps": 10, "eval_every": 5, "batch_size": 4, "workers": 2},
}


def _with(path: str, value):
    spec = copy.deepcopy(GOOD)
    *parents, last = path.split(".")
    node = spec
    for key in parents:
        node = node.setdefault(key, {})
    if value is _DELETE:
        del node[last]
    else:
        node[last] = value
    return spec


_DELETE = object()

BAD = [
    (_with("trian", {}), "trian: unknown key"),
    (_with("train.stepz", 3), "train.stepz: unknown key"),
    (_with("train.steps", "ten"), "train.steps: expected an integer, got 'ten'"),
    (_with("train.steps", 0), "train.steps: 0 is out of range; it must be >= 1"),
    (_with("train.bf16", "yes"), "train.bf16: expected true or false"),
    (_with("train.eval_every", 50), "train.eval_every (50) exceeds train.steps (10)"),
    (_with("train.batch_size", 5), "train.batch_size (5) must be a multiple of train.workers (2)"),
    (_with("name", _DELETE), "name: required key is missing"),
    (_with("search.space.temperature", {"loguniform": [0.2, 0.02]}), "empty or inverted range [0.2, 0.02]"),
    (_with("search.space.temperature", {"uniform": [0.1, 0.1]}), "empty or inverted range"),
    (_with("search.space.temperature", {"loguniform": [0.0, 0.2]}), "bounds must be > 0"),
    (_with("search.space.temperature", {"gaussian": [0, 1]}), "search.space.temperature: expected one of"),
    (_with("search.space.split_probability", {"uniform": [0.5, 1.0]}), "it must be < 1.0"),
    (_with("search.space.pooling", {"choice": ["cls", "attention"]}), "'attention' is not one of"),
    (_with("search.space.lr_max", {"uniform": [0.1, 0.2]}), "search.space.lr_max: unknown hyperparameter"),
    (_with("search.space.batch_size", {"choice": [4, 7]}), "multiple of train.workers"),
    (_with("search.space.trainable", {"choice": ["all", "positions"]}), "this spec converts nothing"),
    (_with("search.space.position_init", {"choice": ["copy", "interpolate"]}), "position_init: interpolate re-fills"),
    (_with("hyperparameters.skipped_positions", 2048), "skipped_positions: reads training views at the position rows"),
    (
        _with("hyperparameters", {"hard_negatives": 1, "loss": "ntxent"}),
        "hard_negatives: loss ntxent takes no hard negatives (infonce does)",
    ),
    (_with("search.space.hard_negatives", {"choice": [0, 1, 2, 4, 5]}), "5 is out of range; it must be <= 4"),
    (_with("search.objective.tasks", {}), "search.objective: give either tasks"),
    (_with("search.objective.objectives", {"a": {"r8-fewshot": 1.0}}), "give either tasks"),
    (_with("search.objective", {"objectives": {"a": {"r8-fewshot": 1.0}}}), "name two or more objectives"),
    (
        _with("search.objective", {"objectives": {"a": {"r8-fewshot": 1.0}, "b": {}}}),
        "search.objective.objectives.b: name at least one task",
    ),
    (
        _with("search.objective", {"objectives": {"a": {"r8-fewshot": 1.0}, "b": {"nope": 1.0}}}),
        "search.objective.objectives.b: unknown task 'nope'",
    ),
    (_with("search.warm_start", [{"lr": 1e-4}]), "search.warm_start[0].lr: not a searched hyperparameter"),
    (_with("search.warm_start", [{"temperature": 0.5}]), "outside the searched range [0.02, 0.2]"),
    (_with("search.warm_start", [{"pooling": "max"}]), "'max' is not one of the choices"),
    (_with("search.warm_start", {"pooling": "cls"}), "search.warm_start: expected a list"),
    (_with("search.objective.tasks", {"no-such-task": 1.0}), "unknown task 'no-such-task'"),
    (_with("search.objective.tasks", {"beir:/nonexistent": 1.0}), "lacks corpus.jsonl"),
    (_with("search.objective.tasks", {"news-title-retrieval": 0.0}), "weight must be > 0"),
    (_with("search.sampler", "bayes"), "search.sampler: 'bayes' is not one of 'tpe', 'random', 'grid'"),
    (_with("recipe", "nope"), "recipe: unknown recipe 'nope'"),
    (_with("hyperparameters", {"temperature": -1.0}), "hyperparameters.temperature: -1.0 is out of range"),
    (_with("hyperparameters", {"tau": 0.1}), "hyperparameters.tau: unknown hyperparameter"),
    (_with("hyperparameters", {"bregman_weight": 0.0}), "bregman_weight: 0.0 is out of range; it must be > 0.0"),
    (_with("hyperparameters", {"bregman_k": -1}), "bregman_k: -1 is out of range; it must be >= 0"),
    (_with("profiles", {"huge": {}}), "profiles.huge: unknown profile"),
    (_with("profiles", {"smoke": {"train": {"steps": "x"}}}), "(in the overrides of profile 'smoke')"),
    (_with("profiles", {"local": {"train": {"wrokers": 1}}}), "train.wrokers: unknown key"),
    (_with("base", "small"), "base: expected a mapping, got 'small'"),
    (_with("base", {"layerz": 2}), "base.layerz: unknown key; allowed here: batch_size, checkpoint_every"),
    (_with("base", {"layers": "four"}), "base.layers: expected an integer, got 'four'"),
    (_with("base", {"layers": 0}), "base.layers: 0 is out of range; it must be >= 1"),
    (_with("base", {"lr": 0.0}), "base.lr: 0.0 is out of range; it must be > 0.0"),
    (_with("base", {"vocab_size": 50}), "base.vocab_size: 50 is out of range; it must be >= 100"),
    (_with("base", {"lowercase": "yes"}), "base.lowercase: expected true or false"),
    (_with("base", {"hidden": 100, "heads": 3}), "base.heads: base.hidden (100) must be a multiple of base.heads (3)"),
    (_with("base", {"batch_size": 5}), "base.batch_size (5) must be a multiple of train.workers (2)"),
    (_with("base", {"max_length": 256}), "train.max_length (512) exceeds base.max_length (256)"),
    ({**GOOD, "base_model": "all-minilm-l6-v2", "base": {}}, "base_model: give either base_model"),
    (
        {**GOOD, "base": {}, "profiles": {"local": {"base_model": "all-minilm-l6-v2"}}},
        "profiles.local.base_model: the spec trains its base (base:); add base: null",
    ),
    (
        _with("profiles", {"smoke": {"base": {"steps": 0}}}),
        "base.steps: 0 is out of range; it must be >= 1 (in the overrides of profile 'smoke')",
    ),
    (_with("search.scheduler", {"pbt": {"quantile_fraction": 0.6}}), "quantile_fraction: 0.6 is out of range"),
    (
        _with(
            "search", {**GOOD["search"], "space": {"pooling": {"choice": ["cls", "mean"]}}, "scheduler": {"pbt": {}}}
        ),
        "search.scheduler.pbt: search.space has nothing PBT can perturb mid-trial",
    ),
    (
        _with("search", {**GOOD["search"], "space": {"mlm_weight": {"choice": [0.0, 0.1]}}, "scheduler": {"pbt": {}}}),
        "search.space.mlm_weight: under PBT every value must be above 0",
    ),
    (
        {
            **GOOD,
            "backbone": {"longformer": {}},
            "search": {
                **GOOD["search"],
                "space": {"lr": {"loguniform": [1e-5, 1e-4]}, "trainable": {"choice": ["all", "positions"]}},
                "scheduler": {"pbt": {}},
            },
        },
        "search.space.trainable: under PBT a trial continues from another's weights",
    ),
    (
        {
            **GOOD,
            "backbone": {"longformer": {}},
            "search": {
                **GOOD["search"],
                "space": {"lr": {"loguniform": [1e-5, 1e-4]}, "position_init": {"choice": ["copy", "interpolate"]}},
                "scheduler": {"pbt": {}},
            },
        },
        "search.space.position_init: under PBT a trial continues from another's weights",
    ),
    (
        _with(
            "search",
            {
                **GOOD["search"],
                "space": {
                    "pooling": {"choice": ["cls", "mean"]},
                    "lr": {"loguniform": [1e-5, 1e-4], "when": {"pooling": "cls"}},
                },
                "scheduler": {"pbt": {}},
            },
        ),
        "search.space.lr.when: PBT draws every dimension at random",
    ),
    (
        _with(
            "search",
            {
                **GOOD["search"],
                "objective": {"objectives": {"a": {"news-title-retrieval": 1.0}, "b": {"r8-fewshot": 1.0}}},
                "scheduler": {"pbt": {}},
            },
        ),
        "search.scheduler.pbt: PBT follows one objective",
    ),
    (
        _with("search", {**GOOD["search"], "confirm_seeds": 2, "scheduler": {"pbt": {}}}),
        "search.confirm_seeds: a PBT trial's settings change as it trains",
    ),
    (
        {
            **GOOD,
            "train": {"steps": 30, "eval_every": 10},
            "study": {
                "rows": {"a": {"recipe": "simcse"}},
                "table": {"r8-fewshot": ["main"]},
                "tune_best": 0,
                "rounds": 4,
            },
        },
        "study.rounds (4) must divide train.steps (30)",
    ),
    # a plug-in's own rule for its setting (DECA's augmentation: doctune_core.fields.constraint's check)
    (
        _with("hyperparameters", {"augmentation": "synonyms"}),
        "hyperparameters.augmentation: unknown augmentation 'synonyms'; known: synonym,",
    ),
]


@pytest.mark.parametrize(("raw", "message"), BAD, ids=[m[:40] for _, m in BAD])
def test_bad_spec_is_refused_with_a_message_naming_the_key(raw, message):
    with pytest.raises(SpecError) as caught:
        parse_spec(raw, "local")
    assert message in str(caught.value)


def test_several_objectives_and_warm_start_points_are_typed():
    raw = _with(
        "search.objective", {"objectives": {"quality": {"r8-fewshot": 1.0}, "length": {"length-robustness": 2}}}
    )
    raw["search"]["warm_start"] = [{"temperature": 0.05, "pooling": "mean"}]
    spec = parse_spec(raw, "full")
    assert spec.search.objective.named() == {"quality": {"r8-fewshot": 1.0}, "length": {"length-robustness": 2.0}}
    assert spec.search.warm_start == [{"temperature": 0.05, "pooling": "mean"}]
    assert parse_spec(GOOD, "full").search.objective.named() == {"objective": {"news-title-retrieval": 1.0}}


def test_good_spec_becomes_typed_objects():
    spec = parse_spec(GOOD, "full")
    assert spec.train.steps == 10 and spec.search.space["temperature"].values == (0.02, 0.2)
    fixed = spec.fixed_hyperparameters()
    assert fixed.batch_size == 4 and fixed.split_probability == 0.5


def test_profiles_shrink_and_the_specs_own_overrides_win():
    raw = _with("profiles", {"smoke": {"train": {"steps": 3, "eval_every": 1}}})
    smoke = parse_spec(raw, "smoke")
    assert (smoke.train.steps, smoke.train.eval_every, smoke.train.max_length) == (3, 1, 64)
    assert smoke.evaluation.limits.max_queries == 30
    assert parse_spec(raw, "full").train.steps == 10


def test_a_variant_of_a_shipped_spec_keeps_its_changes_under_every_profile(tmp_path):
    """``write_variant``: dotted changes reach the spec and its own profile sections, so neither the
    built-in profiles (smoke: 4 steps) nor the spec's own (docsplit_long's local: 64) undo them."""
    space = {"lr": {"loguniform": [1e-5, 1e-4]}}
    changes = {"train.steps": 6, "train.eval_every": 3, "search.space": space, "search.warm_start": []}
    path = write_variant("docsplit_long", tmp_path / "variant", changes)
    assert path == tmp_path / "variant" / "docsplit_long.yaml"
    for profile in PROFILES:
        spec, _ = load_spec(str(path), profile)
        assert (spec.train.steps, spec.train.eval_every, list(spec.search.space)) == (6, 3, ["lr"]), profile
    # the steps only (with the changed space, the spec's own warm start would name dimensions it drops)
    steps = {"train.steps": 6, "train.eval_every": 3}
    smoke_only = write_variant("docsplit_long", tmp_path / "smoke", steps, profiles=("smoke",))
    assert load_spec(str(smoke_only), "smoke")[0].train.steps == 6
    assert load_spec(str(smoke_only), "local")[0].train.steps == 64  # the spec's own local section, untouched
    assert read_raw(find_spec_file("docsplit_long"))["train"]["steps"] == 500  # the shipped file, untouched


def test_a_profile_names_each_value_of_the_spec_it_replaces_and_the_specs_own_section_keeps_them():
    raw = _with("search.samples", 3)
    replaced = {r.key: (r.spec, r.profile) for r in profile_replacements(raw, "smoke")}
    # GOOD sets steps 10, eval_every 5, batch_size 4 (the smoke profile's own 4: no change), workers 2 (same)
    assert replaced == {"train.steps": (10, 4), "train.eval_every": (5, 2), "search.samples": (3, 2)}
    assert "train.steps 10 → 4" in [r.describe() for r in profile_replacements(raw, "smoke")]
    assert profile_replacements(raw, "full") == []  # the full profile changes nothing of a spec
    kept = _with("profiles", {"smoke": {"train": {"steps": 10}}})
    assert "train.steps" not in {r.key for r in profile_replacements(kept, "smoke")}


BASE = {"layers": 2, "hidden": 64, "heads": 2, "intermediate": 128, "vocab_size": 4000, "steps": 300}


@pytest.mark.parametrize(
    ("hyperparameters", "space", "rows", "weighted"),
    [
        ({}, {}, None, True),  # the default weight, 0.1 (DocSplit)
        ({"mlm_weight": 0.0}, {}, None, False),
        ({"mlm_weight": 0.0}, {"mlm_weight": {"choice": [0.0, 0.05]}}, None, True),  # the space decides
        ({}, {"mlm_weight": {"choice": [0.0]}}, None, False),
        ({}, {"mlm_weight": {"uniform": [0.0, 0.2]}}, None, True),
        ({"mlm_weight": 0.0}, {}, {"a": {"recipe": "simcse"}, "b": {"recipe": "docsplit", "mlm_weight": 0.1}}, True),
        ({"mlm_weight": 0.0}, {}, {"a": {"recipe": "simcse"}}, False),
    ],
)
def test_a_spec_says_whether_any_trial_can_weight_an_mlm_term(hyperparameters, space, rows, weighted):
    raw = _with("hyperparameters", hyperparameters)
    raw["search"]["space"] = space
    if rows is not None:
        raw["study"] = {"rows": rows, "table": {"r8-fewshot": ["main"]}, "tune_best": 0}
    assert parse_spec(raw, "full").may_weight_mlm() is weighted


def test_a_base_section_becomes_settings_and_names_the_base_model():
    spec = parse_spec(_with("base", BASE), "full")
    assert spec.base == BaseSettings(**BASE)  # unset keys keep their defaults (max_length 512, lr 5e-4, ...)
    assert spec.base_model == spec.base.label == "vanilla-bert-L2-H64-V4000-300steps"
    assert parse_spec(GOOD, "full").base is None


def test_builtin_profiles_shrink_a_base_and_the_specs_own_overrides_win():
    raw = _with("base", BASE)
    local, smoke = parse_spec(raw, "local").base, parse_spec(raw, "smoke").base
    assert (local.max_length, smoke.max_length) == (256, 128)  # each profile's evaluation.max_length
    assert smoke.steps <= 20 and smoke.layers <= 2 and smoke.hidden <= 64
    raw["profiles"] = {"smoke": {"base": {"steps": 3, "vocab_size": 500}}}
    smoke = parse_spec(raw, "smoke").base
    assert (smoke.steps, smoke.vocab_size, smoke.hidden) == (3, 500, 64)
    for profile in PROFILES:  # a spec without base: gets none from a profile
        assert parse_spec(GOOD, profile).base is None


def test_a_profile_chooses_between_base_model_and_base():
    trains_in_smoke = {**GOOD, "base_model": "all-minilm-l6-v2", "profiles": {"smoke": {"base": BASE}}}
    assert parse_spec(trains_in_smoke, "full").base_model == "all-minilm-l6-v2"
    smoke = parse_spec(trains_in_smoke, "smoke")
    assert smoke.base is not None and smoke.base_model == smoke.base.label
    packaged_in_local = {**GOOD, "base": BASE, "profiles": {"local": {"base": None}}}
    local = parse_spec(packaged_in_local, "local")
    assert local.base is None and local.base_model == "all-minilm-l6-v2"
    assert parse_spec(packaged_in_local, "full").base == BaseSettings(**BASE)


@pytest.mark.parametrize(
    "path", sorted([*SPACES_DIR.glob("*.yaml"), *(ROOT / "bench").glob("*.yaml")]), ids=lambda p: p.stem
)
@pytest.mark.parametrize("profile", PROFILES)
def test_every_shipped_spec_is_valid_under_every_profile(path, profile):
    parse_spec(read_raw(path), profile)


def test_specs_are_found_by_name_with_or_without_suffix():
    assert find_spec_file("smoke") == find_spec_file("smoke.yaml") == SPACES_DIR / "smoke.yaml"
    with pytest.raises(SpecError, match="not found"):
        find_spec_file("no_such_spec")


def _cli(*args: str, cwd=ROOT):
    return subprocess.run(
        [sys.executable, "-m", "platform.search", *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("name: [unclosed", "malformed YAML at line 1"),
        ("- a list", "a spec is a YAML mapping"),
        (yaml.safe_dump(_with("train.steps", "ten")), "train.steps: expected an integer"),
        (yaml.safe_dump(_with("base_model", "/no/such/model")), "model directory '/no/such/model' does not exist"),
        (yaml.safe_dump(_with("corpus", {"source": "/no/such/corpus.jsonl"})), "corpus source"),
        (
            yaml.safe_dump(_with("base_model", "no-such-org/no-such-model")),
            "could not be fetched from the Hugging Face",
        ),
        (
            yaml.safe_dump(_with("corpus", {"source": "hf:no-such-org/no-such-set"})),
            "could not load Hugging Face dataset",
        ),
    ],
)
def test_cli_exits_2_with_one_message_and_starts_nothing(tmp_path, content, message):
    spec = tmp_path / "bad.yaml"
    spec.write_text(content)
    run_dir = tmp_path / "run"
    done = _cli(str(spec), "--run-dir", str(run_dir))
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    assert done.stderr.count("doctune: error:") == 1 and "Traceback" not in done.stderr
    assert not run_dir.exists()


def test_cli_refuses_an_existing_run_dir_without_resume(tmp_path):
    (tmp_path / "run").mkdir()
    done = _cli("smoke", "--run-dir", str(tmp_path / "run"))
    assert done.returncode == 2 and "pass --resume" in done.stderr
    done = _cli("smoke", "--run-dir", str(tmp_path / "run"), "--resume")
    assert done.returncode == 2 and "no search to resume" in done.stderr


def test_the_spec_reference_is_generated_from_the_schema():
    from platform.spec.docs import render

    assert (ROOT / "docs" / "spec.md").read_text() == render(), (
        "regenerate: python -m platform.spec.docs > docs/spec.md"
    )


def _shipped(name: str, profile: str = "full"):
    return parse_spec(read_raw(find_spec_file(name)), profile)


def test_deca_wordnet_starts_from_decas_bert_setting():
    spec = _shipped("deca_wordnet")
    assert spec.fixed_hyperparameters().pooling == "cls"  # DECA §3.2: the [CLS] embedding
    low, high = spec.search.space["lr"].values
    assert low <= 3e-6 <= high  # App. A.3.2: BERT at lr 3e-6
    first = spec.search.warm_start[0]
    assert (first["loss"], first["temperature"], first["lr"]) == ("deca_ntxent", 1.0, 3e-6)  # Eq. 4, A.3.2


def test_bregman_longformer_starts_from_the_papers_selected_configuration():
    spec = _shipped("bregman_longformer")
    first = spec.search.warm_start[0]  # App. A: K 10, sigma 2, lambda 2, temperature 0.1, lr 3e-5
    assert first == {"bregman_k": 10, "bregman_sigma": 2.0, "bregman_weight": 2.0, "temperature": 0.1, "lr": 3e-5}
    assert spec.fixed_hyperparameters().bregman_temperature == 0.1
    row = _shipped("seed_study").study.rows["simcse-bregman"]
    assert (row["bregman_k"], row["bregman_sigma"], row["bregman_weight"]) == (10, 2.0, 2.0)


@pytest.mark.parametrize("profile", PROFILES)
def test_where_la_ser_3_is_claimed_only_the_token_budget_bounds_m(profile):
    """LA(SER)^3 §4: m uniform on [1, floor(budget / length)]: elongation_max may not bind below the budget."""
    for name in ("laser_minilm", "quality_vs_length", "all_recipes"):
        spec = _shipped(name, profile)
        budget = spec.train.max_length - 2
        assert spec.search.space["elongation_max"].values[-1] >= budget, name  # the search can reach it
        laser_starts = [p for p in spec.search.warm_start if p.get("recipe", "laser") == "laser" and "laser_mode" in p]
        assert all(p["elongation_max"] >= budget for p in laser_starts), name
    study = _shipped("seed_study", profile)
    for row in study.study.rows.values():
        if row["recipe"] == "laser":
            assert row["elongation_max"] >= study.train.max_length - 2
    # long_study's elongated rows at the largest m allowed: the budget binds at 512 tokens, and at 4,096
    # for any anchor of 8 tokens or more
    long_study = _shipped("long_study", profile)
    elongated = [row for row in long_study.study.rows.values() if "elongation" in row.get("views", "")]
    reach = min(512, long_study.train.max_length - 2)
    assert len(elongated) == 2 and all(row["elongation_max"] >= reach for row in elongated)


def test_a_search_parses_its_spec_once(tmp_path, monkeypatch):
    """A search request validates the spec under every profile once; the profile chosen later, the
    provisional spec before Ray and a resumed run's checks read those specs, never the YAML again."""
    import json

    import platform.search_path.request as request_module
    from platform.search_path.request import SearchRequest

    parsed = []
    monkeypatch.setattr(request_module, "parse_profiles", lambda raw: parsed.append(raw) or parse_profiles(raw))
    request = SearchRequest.from_command_line("smoke", None, tmp_path / "run", False)
    assert request.provisional_spec().name == "smoke"
    assert [request.spec_for(profile).name for profile in PROFILES] == ["smoke"] * len(PROFILES)
    assert len(parsed) == 1
    (tmp_path / "run").mkdir()
    record = {"profile": "smoke", "resolved_spec": dataclasses.asdict(request.spec_for("smoke"))}
    (tmp_path / "run" / "search.json").write_text(json.dumps(record, default=str))
    resumed = SearchRequest.from_command_line("smoke", None, tmp_path / "run", True)
    assert resumed.provisional_spec() == resumed.spec_for("smoke") and len(parsed) == 2  # one more request


def test_validation_only_reads_no_locked_part_and_a_resume_keeps_it(tmp_path):
    """``--validation-only`` scores validation alone (``evaluation.locked_part`` false: the plan's parts);
    a resumed search keeps what its start chose without the option repeated, and a search started
    reading its locked part is refused a change to validation only (the spec differs)."""
    import json

    from platform.exit_codes import UsageError
    from platform.search_path.plans import evaluation_plan
    from platform.search_path.request import SearchRequest

    request = SearchRequest.from_command_line("smoke", "smoke", tmp_path / "run", False, validation_only=True)
    spec = request.provisional_spec()
    assert not spec.evaluation.locked_part and evaluation_plan(spec).parts == ("val",)
    reading = SearchRequest.from_command_line("smoke", "smoke", tmp_path / "other", False).provisional_spec()
    assert evaluation_plan(reading).parts == ("val", "test")
    (tmp_path / "run").mkdir()
    record = {"spec": "smoke.yaml", "profile": "smoke", "resolved_spec": dataclasses.asdict(spec)}
    (tmp_path / "run" / "search.json").write_text(json.dumps(record, default=str))
    resumed = SearchRequest.from_command_line("smoke", "smoke", tmp_path / "run", True)  # no --validation-only
    assert not resumed.provisional_spec().evaluation.locked_part
    record["resolved_spec"] = dataclasses.asdict(reading)
    (tmp_path / "run" / "search.json").write_text(json.dumps(record, default=str))
    asked = SearchRequest.from_command_line("smoke", "smoke", tmp_path / "run", True, validation_only=True)
    with pytest.raises(UsageError, match="the spec or profile differs"):
        asked.provisional_spec()
