"""DECA's back-translation, through two real (tiny, untrained) seq2seq models made locally."""

from __future__ import annotations

import random

import pytest
from transformers import AutoTokenizer, BartConfig, BartForConditionalGeneration

from platform.spec import SpecError, parse_spec
from trainers.pairs import build_pairs
from trainers.settings import TrialSettings


@pytest.fixture(scope="module")
def translation_models(minilm_dir, tmp_path_factory):
    """Two tiny BART models with the embedded encoder's WordPiece tokenizer: untrained, so their
    'translations' are arbitrary, but every step of the real path runs."""
    tokenizer = AutoTokenizer.from_pretrained(minilm_dir)
    dirs = []
    for seed, name in enumerate(("forward", "backward")):
        import torch

        torch.manual_seed(seed)
        config = BartConfig(
            vocab_size=len(tokenizer),
            d_model=16,
            encoder_layers=1,
            decoder_layers=1,
            encoder_attention_heads=2,
            decoder_attention_heads=2,
            encoder_ffn_dim=32,
            decoder_ffn_dim=32,
            max_position_embeddings=160,
            pad_token_id=tokenizer.pad_token_id,
            bos_token_id=tokenizer.cls_token_id,
            eos_token_id=tokenizer.sep_token_id,
            decoder_start_token_id=tokenizer.sep_token_id,
            forced_eos_token_id=None,
        )
        path = tmp_path_factory.mktemp("mt") / name
        BartForConditionalGeneration(config).save_pretrained(path)
        tokenizer.save_pretrained(path)
        dirs.append(str(path))
    return ",".join(dirs)


def test_back_translation_replaces_about_aug_p_of_the_sentences(translation_models):
    sentences = [f"sentence number {i} is about the weather." for i in range(20)]
    hp = TrialSettings(recipe="deca", augmentation="back_translation", aug_p=0.5, translation_models=translation_models)
    build = build_pairs(hp, 256, lambda t: len(t.split()), [sentences])
    original, augmented = build(sentences, random.Random(0))
    assert original == " ".join(sentences) and augmented != original
    assert build(sentences, random.Random(0)) == (original, augmented)  # greedy and cached: deterministic
    # exactly the sentences the seeded draws chose (one uniform draw per sentence, below aug_p) changed
    draws = random.Random(0)
    chosen = {s for s in sentences if draws.random() < 0.5}
    assert {s for s in sentences if s not in augmented} == chosen and 0 < len(chosen) < len(sentences)


def test_back_translation_without_models_is_refused_with_the_reason():
    raw = {
        "name": "t",
        "recipe": "deca",
        "hyperparameters": {"augmentation": "back_translation"},
        "search": {"objective": {"tasks": {"r8-fewshot": 1.0}}},
        "train": {"steps": 4, "eval_every": 2, "batch_size": 4, "workers": 2},
    }
    with pytest.raises(SpecError, match="two local sequence-to-sequence translation models"):
        parse_spec(raw, "full")
    raw["hyperparameters"]["translation_models"] = "/no/a,/no/b"
    with pytest.raises(SpecError, match="does not exist"):
        parse_spec(raw, "full")
