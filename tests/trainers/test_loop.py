"""The trial's module, without Ray: what every worker builds before training."""

from __future__ import annotations

import torch

from trainers.model import build_module
from trainers.settings import TrialSettings


def test_module_trains_with_dropout_so_identical_views_differ(minilm_dir):
    module, tokenizer = build_module(minilm_dir, TrialSettings(recipe="simcse", mlm_weight=0.0))
    assert module.training
    batch = tokenizer(["the same text", "the same text"], return_tensors="pt")
    embeddings = module(batch["input_ids"], batch["attention_mask"])["embeddings"]
    assert not torch.allclose(embeddings[0], embeddings[1])


def test_module_carries_the_heads_the_hyperparameters_ask_for(minilm_with_mlm_head):
    hp = TrialSettings(loss="simsiam", bregman_weight=1.0, bregman_k=8)  # and the default MLM weight
    module, _ = build_module(minilm_with_mlm_head, hp)
    assert module.with_mlm and module.heads.predictor is not None
    assert module.heads.bregman.k == 8
