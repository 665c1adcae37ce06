"""What a trial trains (``trainable``): LongEmbed's tuning of the new position rows alone keeps
inputs as long as the base read exactly as they were."""

from __future__ import annotations

import pytest
import torch

from doctune_core.longformer import base_position_rows, cached_longformer, first_new_position
from trainers.model import build_module
from trainers.settings import TrialSettings
from trainers.trainable import TOP_LAYERS, parameter_groups
from trainers.training_loss import training_loss

pytestmark = pytest.mark.slow  # a conversion and three steps at 600 tokens

LONG = " ".join(f"Paragraph {i} tells what the council decided about road number {i} and why." for i in range(40))


@pytest.fixture(scope="module")
def converted(minilm_dir, tmp_path_factory) -> str:
    return str(cached_longformer(minilm_dir, 1024, 64, tmp_path_factory.mktemp("cache")))


def _one_step(model_dir: str, trainable: str, position_init: str = "copy") -> tuple[dict, dict, object]:
    """The encoder's weights before and after one AdamW step on two long pairs, and the module."""
    hp = TrialSettings(trainable=trainable, position_init=position_init, mlm_weight=0.0, lr=1e-2)
    module, tokenizer = build_module(model_dir, hp)
    before = {name: p.detach().clone() for name, p in module.model.named_parameters()}
    optimizer = torch.optim.AdamW(parameter_groups(module, hp.trainable, hp.weight_decay), lr=hp.lr)
    batch = tokenizer(
        [LONG, LONG[200:], LONG[10:], LONG[300:]], padding=True, truncation=True, max_length=1000, return_tensors="pt"
    )
    assert batch["input_ids"].shape[1] > 512  # the new rows are read
    training_loss(hp, module(batch["input_ids"], batch["attention_mask"]))[0].backward()
    optimizer.step()
    after = {name: p.detach().clone() for name, p in module.model.named_parameters()}
    return before, after, module


def test_positions_trains_the_new_position_rows_alone_and_short_inputs_embed_as_before(converted):
    first_new = first_new_position(converted)
    assert first_new == 1 + 512  # the offset of pad + 1 (the MiniLM pads with 0), then its 512 rows
    before, after, module = _one_step(converted, "positions")
    changed = {name for name in before if not torch.equal(before[name], after[name])}
    assert changed == {"embeddings.position_embeddings.weight"}
    rows = before["embeddings.position_embeddings.weight"], after["embeddings.position_embeddings.weight"]
    assert torch.equal(rows[0][:first_new], rows[1][:first_new]) and not torch.equal(
        rows[0][first_new:], rows[1][first_new:]
    )
    assert all(p.requires_grad for p in module.heads.parameters())


def test_with_interpolated_positions_the_base_rows_are_every_s_th_and_stay(converted):
    before, after, module = _one_step(converted, "positions", "interpolate")
    changed = {name for name in before if not torch.equal(before[name], after[name])}
    assert changed == {"embeddings.position_embeddings.weight"}
    base = base_position_rows(module.model, first_new_position(converted))
    assert base.sum() == 1 + 512 and not base[2]  # the padding row, then every second row of 1,024
    rows = before["embeddings.position_embeddings.weight"], after["embeddings.position_embeddings.weight"]
    assert torch.equal(rows[0][base], rows[1][base]) and not torch.equal(rows[0][~base], rows[1][~base])


def test_positions_and_top_trains_the_top_layers_too(converted):
    before, after, module = _one_step(converted, "positions+top")
    layers = len(module.model.encoder.layer)
    changed = {
        name.split(".")[2]
        for name in before
        if name.startswith("encoder.layer.") and not torch.equal(before[name], after[name])
    }
    assert changed == {str(i) for i in range(layers - TOP_LAYERS, layers)}
    assert torch.equal(before["embeddings.word_embeddings.weight"], after["embeddings.word_embeddings.weight"])


def test_all_trains_every_weight_as_before(converted):
    before, after, _ = _one_step(converted, "all")
    assert not torch.equal(before["embeddings.word_embeddings.weight"], after["embeddings.word_embeddings.weight"])


def test_a_model_no_conversion_made_is_refused_for_positions(minilm_dir):
    with pytest.raises(ValueError, match="has none: convert it"):
        build_module(minilm_dir, TrialSettings(trainable="positions", mlm_weight=0.0))
