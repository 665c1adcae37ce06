"""No shipped spec trains an MLM term through a random head: wherever a trial can draw
``mlm_weight`` > 0, its base carries a trained masked-LM head or the search trains one first."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest

from doctune_core.encoder import has_mlm_head, resolve_model
from platform.search_path.inputs import InputsPlan, needs_mlm_head, prepare_inputs
from platform.spec import PROFILES, SPACES_DIR, parse_spec, read_raw
from platform.strategies.optuna_base import ConditionalSpace
from tests.conftest import run_smoke_search, spec_variant
from trainers.settings import TrialSettings

DRAWS = 64  # random configurations per spec; every shipped MLM choice has at most 4 values


def trial_mlm_weights(spec) -> set[float]:
    """The MLM weights this spec's trials and study rows train with, drawn as a search draws them
    (the space's define-by-run sampling, its warm-start points) and as a study builds its rows."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    fixed = {**spec.hyperparameters, "recipe": spec.recipe}
    configurations = [dict(point) for point in spec.search.warm_start]
    if spec.search.space:
        study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
        draw = ConditionalSpace(spec.search.space)
        for _ in range(DRAWS):
            trial = study.ask()
            draw(trial)
            configurations.append(trial.params)
            study.tell(trial, 0.0)
    else:
        configurations.append({})
    if spec.study is not None:
        configurations += list(spec.study.rows.values())
    return {TrialSettings(**{**fixed, **configuration}).mlm_weight for configuration in configurations}


@pytest.mark.parametrize("profile", PROFILES)
def test_every_shipped_spec_gives_each_mlm_term_a_trained_head(profile):
    base_model_dir = {}
    planned, without_mlm, own_base = [], [], []
    for path in sorted(SPACES_DIR.glob("*.yaml")):
        spec = parse_spec(read_raw(path), profile)
        weighted = max(trial_mlm_weights(spec)) > 0
        assert spec.may_weight_mlm() == weighted, path.stem
        if spec.base is not None:  # the base stage trains BERT with its masked-LM head and saves both
            own_base.append(path.stem)
            continue
        if spec.base_model not in base_model_dir:
            base_model_dir[spec.base_model] = resolve_model(spec.base_model)
        model_dir = base_model_dir[spec.base_model]
        if weighted:
            assert has_mlm_head(model_dir) or needs_mlm_head(InputsPlan.of(spec), model_dir), path.stem
            planned.append(path.stem)
        else:
            assert not needs_mlm_head(InputsPlan.of(spec), model_dir), path.stem  # no head trained that no trial uses
            without_mlm.append(path.stem)
    # the shipped specs cover both cases: DocSplit's MLM term and recipes without one
    # (docsplit_long starts from the packaged MiniLM in every profile: its head is planned)
    assert {"docsplit_long", "simde_bert", "smoke"} <= set(planned), planned
    assert "docsplit_long" not in own_base
    assert {"deca_wordnet", "laser_minilm"} <= set(without_mlm), without_mlm


@pytest.mark.slow  # trains the smoke head unless cached, converts it to a 4096-position Longformer
def test_a_longformer_backbone_is_converted_from_the_base_with_its_trained_head():
    """``docsplit_long``: the trials' Longformer carries the head trained for MiniLM, and the
    baseline row scores the head's directory, whose encoder is MiniLM's."""
    import torch

    from doctune_core.encoder import load_encoder
    from platform.spec import load_spec

    spec, _ = load_spec("docsplit_long", "smoke")
    prepared = prepare_inputs(InputsPlan.of(spec))
    model_dir, source_model = prepared.model_dir, prepared.source_model
    assert Path(source_model).parent.name == "mlm_heads" and Path(model_dir).parent.name == "longformer"
    bert, _ = load_encoder(source_model, with_mlm_head=True)
    longformer, _ = load_encoder(model_dir, with_mlm_head=True)  # refused if the conversion lost the head
    assert type(longformer).__name__ == "LongformerForMaskedLM"
    torch.testing.assert_close(longformer.lm_head.dense.weight, bert.cls.predictions.transform.dense.weight)
    torch.testing.assert_close(longformer.lm_head.bias, bert.cls.predictions.bias)
    assert bert.cls.predictions.transform.LayerNorm.weight.abs().sum() > 0  # trained away from its zero start


@pytest.mark.ray  # starts Ray and trains a head
@pytest.mark.own_ray  # the search's Ray, its own
def test_the_cli_refuses_a_head_no_better_than_unigram_with_one_message_and_exit_2(tmp_path):
    variant = spec_variant("smoke", tmp_path, **{"mlm_head.lr": 1.0})  # a step of about 1 on every weight
    run_dir = tmp_path / "run"
    done = run_smoke_search(variant, run_dir)
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    assert done.stderr.count("doctune: error:") == 1 and "Traceback" not in done.stderr
    assert "no better than predicting the corpus's unigram token distribution" in done.stderr
    assert "set mlm_weight to 0" in done.stderr
    assert not run_dir.exists()
