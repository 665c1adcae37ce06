"""The flat namespace of a trial's settings, assembled from the settings every trial reads and each
plug-in's own (trainers.settings)."""

from __future__ import annotations

import dataclasses
import os
import pickle
import subprocess
import sys
from dataclasses import dataclass, field

import cloudpickle
import pytest

from doctune_core.fields import constraint
from tests.conftest import ROOT
from trainers.config import Hyperparameters, own_settings
from trainers.losses import CONTRASTIVE_LOSSES, AnchorSettings, BregmanSettings
from trainers.pairs import RECIPES, Recipe
from trainers.pairs.docsplit import DocSplitSettings
from trainers.settings import SETTINGS, TrialSettings, _settings


def test_hyperparameters_hold_only_what_every_trial_reads_and_each_plug_in_owns_the_rest():
    common = {f.name for f in dataclasses.fields(Hyperparameters)}
    assert common == {
        "recipe",
        "views",
        "loss",
        "lr",
        "weight_decay",
        "warmup_ratio",
        "batch_size",
        "pooling",
        "contrastive_weight",
        "mlm_weight",
        "hard_negatives",
        "trainable",
        "position_init",
        "skipped_positions",
    }
    owned = {
        f.name: owner
        for owner, settings in [
            *((f"recipe {name}", RECIPES[name].settings) for name in RECIPES),
            *((f"loss {name}", CONTRASTIVE_LOSSES[name].settings) for name in CONTRASTIVE_LOSSES),
            ("the Bregman term", BregmanSettings),
            ("the anchor term", AnchorSettings),
        ]
        for f in dataclasses.fields(settings)
    }
    assert not common & set(owned)
    assert set(SETTINGS) == common | set(owned) == {f.name for f in dataclasses.fields(TrialSettings)}
    assert SETTINGS["split_probability"].owners == ("recipe docsplit",)
    assert SETTINGS["elongation_max"].owners == ("recipe docsplit", "recipe laser")  # one field, inherited by both
    assert SETTINGS["temperature"].owners == ("loss deca_ntxent", "loss infonce", "loss ntxent")
    assert SETTINGS["lr"].owners == ()


def test_a_plug_in_receives_its_own_settings_with_the_trials_values():
    hp = TrialSettings(views="split+elongation", split_probability=0.3, elongation_max=9, temperature=0.2)
    assert own_settings(hp, DocSplitSettings) == DocSplitSettings(
        elongation_min=1, elongation_max=9, split_probability=0.3, elongate=True
    )
    assert (hp.recipe, hp.elongate) == ("docsplit", True)  # what views decides, the recipe's setting included


def test_each_augmentation_type_is_declared_on_the_recipe_that_makes_it():
    from trainers.pairs import RECIPES, VIEWS

    assert VIEWS.names() == ["crops", "dropout", "elongation", "span", "split", "split+elongation", "word"]
    assert {name: VIEWS[name].recipe for name in VIEWS} == {
        name: recipe for recipe in RECIPES for name in RECIPES[recipe].views
    }
    assert TrialSettings(views="dropout").recipe == "simcse"  # SimCSE's views: the same text, dropout the noise
    with pytest.raises(KeyError, match="unknown augmentation type 'sentence'; known: crops, dropout, elongation"):
        TrialSettings(views="sentence")


def test_trial_settings_travel_to_ray_workers_by_reference():
    hp = TrialSettings(recipe="laser", anchor="random")
    assert pickle.loads(cloudpickle.dumps(hp)) == hp
    assert b"make_dataclass" not in cloudpickle.dumps(hp) and b"trainers.settings" in cloudpickle.dumps(hp)


def test_a_setting_declared_twice_differently_is_refused_naming_both_owners():
    @dataclass(frozen=True)
    class Clashing:
        split_probability: float = field(default=0.9, metadata=constraint("another meaning", 0.0, 1.0))

    class Clash(Recipe):
        settings = Clashing

    RECIPES.register("clash")(Clash)
    try:
        with pytest.raises(TypeError, match=r"'split_probability' of recipe \w+ is declared again") as refused:
            _settings()
        assert "recipe clash" in str(refused.value) and "recipe docsplit" in str(refused.value)
    finally:
        del RECIPES._entries["clash"]


# doctune's own modules are read; what they import from elsewhere is not (seconds, not a minute of torch)
_MYPY_CONFIG = """[mypy]
follow_imports = skip
ignore_missing_imports = True
[mypy-trainers.*,core.*]
follow_imports = silent
"""


def test_a_type_checker_reads_every_setting_of_a_trial(tmp_path):
    # TrialSettings is assembled at run time from the registries; what a type checker reads is its
    # declaration over the plug-ins' settings classes, which must name every setting the run time has
    uses = "\n".join(f"settings.{name}" for name in SETTINGS)
    (tmp_path / "uses.py").write_text(
        "from typing import assert_type\nfrom trainers.settings import TrialSettings\n"
        f"settings = TrialSettings()\n{uses}\n"
        "assert_type(settings.split_probability, float)\nassert_type(settings.bregman_k, int)\n"
        "assert_type(settings.lr, str)\nsettings.no_such_setting\n"  # the two errors a typed class gives
    )
    (tmp_path / "mypy.ini").write_text(_MYPY_CONFIG)
    mypy = [sys.executable, "-m", "mypy", "--config-file", "mypy.ini", "--cache-dir", "cache", "uses.py"]
    done = subprocess.run(mypy, cwd=tmp_path, env={**os.environ, "MYPYPATH": str(ROOT)}, capture_output=True, text=True)
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    assert len(errors) == 2, done.stdout + done.stderr
    assert "[assert-type]" in errors[0] and '"TrialSettings" has no attribute "no_such_setting"' in errors[1], errors
