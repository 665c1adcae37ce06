"""doctune's Longformer attention computes what Hugging Face's LongformerSelfAttention computes."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn as nn
from transformers import AutoModel, LongformerConfig, LongformerModel
from transformers.models.longformer.modeling_longformer import LongformerSelfAttention

from doctune_core.encoder import bf16_autocast, cpu_computes_bf16, encode, load_encoder
from doctune_core.longformer import convert_to_longformer
from doctune_core.longformer_attention import (
    FusedLongformerSelfAttention,
    _window_blocks,
    _WindowAttentionWithDropout,
    use_fused_attention,
)

TOLERANCE = {"rtol": 1e-5, "atol": 1e-5}


def tiny_config(window: int, dropout: float = 0.0, heads: int = 4) -> LongformerConfig:
    return LongformerConfig(
        vocab_size=100,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=heads,
        intermediate_size=64,
        max_position_embeddings=700,
        attention_window=[window] * 2,
        pad_token_id=1,
        attention_probs_dropout_prob=dropout,
        hidden_dropout_prob=0.0,
    )


def global_mask(pattern: str, batch: int, length: int) -> torch.Tensor:
    mask = torch.zeros(batch, length, dtype=torch.long)
    if pattern == "cls":
        mask[:, 0] = 1
    elif pattern == "several":  # different counts per row, neighbours inside each other's window, a row with none
        mask[0, [0, 3, 4, length - 2]] = 1
        mask[1, 0] = 1
    elif pattern == "many":  # enough global tokens that their keys are projected, not reassociated
        mask[0, : length // 2 : 2] = 1
        mask[1, 1:13] = 1
    return mask


def hf_and_fused(config: LongformerConfig, seed: int = 0) -> tuple[LongformerModel, LongformerModel]:
    torch.manual_seed(seed)
    reference = LongformerModel(config, add_pooling_layer=False).eval()
    fused = copy.deepcopy(reference)
    assert use_fused_attention(fused) == config.num_hidden_layers
    return reference, fused


def forward_backward(model: nn.Module, ids: torch.Tensor, mask: torch.Tensor, globals_: torch.Tensor):
    """Token states and the gradients of a weighted sum of them, w.r.t. every parameter."""
    model.zero_grad(set_to_none=True)
    hidden = model(input_ids=ids, attention_mask=mask, global_attention_mask=globals_).last_hidden_state
    weights = torch.linspace(-1.0, 1.0, hidden.numel()).view_as(hidden)
    (hidden * weights).mean().backward()
    return hidden, {name: p.grad for name, p in model.named_parameters() if p.grad is not None}


def padded_batch(batch: int, length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids and an attention mask with a different amount of padding in each row."""
    ids = torch.randint(2, 100, (batch, length))
    mask = torch.ones(batch, length, dtype=torch.long)
    for row in range(1, batch):
        mask[row, length - row * (length // (batch + 1)) - 1 :] = 0
    ids[mask == 0] = 1
    return ids, mask


@pytest.mark.parametrize(
    ("window", "length", "batch", "pattern"),
    [
        (8, 37, 3, "cls"),  # padded to 40: five blocks, two rows of padding
        (16, 64, 2, "none"),
        (8, 50, 3, "several"),
        (4, 13, 2, "cls"),  # a one-sided window of 2
        (12, 61, 2, "several"),  # a one-sided window of 6: query blocks of 2
        (8, 64, 2, "many"),
        (256, 600, 2, "cls"),  # the converted MiniLM's window, padded to 768
    ],
)
def test_the_model_computes_hugging_faces_outputs_and_gradients(window, length, batch, pattern):
    reference, fused = hf_and_fused(tiny_config(window))
    ids, mask = padded_batch(batch, length)
    globals_ = global_mask(pattern, batch, length)
    expected, expected_grads = forward_backward(reference, ids, mask, globals_)
    got, got_grads = forward_backward(fused, ids, mask, globals_)
    torch.testing.assert_close(got, expected, **TOLERANCE)
    assert got_grads.keys() == expected_grads.keys()
    for name, grad in expected_grads.items():
        torch.testing.assert_close(got_grads[name], grad, **TOLERANCE, msg=lambda m, name=name: f"{name}: {m}")


def extended_mask(mask: torch.Tensor, globals_: torch.Tensor) -> torch.Tensor:
    """The attention mask LongformerModel hands its layers: negative at padding, 0 at local, positive at global."""
    merged = mask * (globals_ + 1)
    extended = torch.zeros(mask.shape)
    extended[merged == 0] = torch.finfo(torch.float32).min
    extended[merged == 2] = torch.finfo(torch.float32).max
    return extended


@pytest.mark.parametrize(("window", "length", "pattern"), [(8, 48, "several"), (16, 32, "none"), (6, 36, "many")])
def test_the_layer_computes_hugging_faces_output_and_input_gradient(window, length, pattern):
    torch.manual_seed(1)
    config = tiny_config(window)
    reference = LongformerSelfAttention(config, layer_id=0).eval()
    fused = copy.deepcopy(reference)
    use_fused_attention(fused)
    assert type(fused) is FusedLongformerSelfAttention
    _, mask = padded_batch(2, length)
    attention_mask = extended_mask(mask, global_mask(pattern, 2, length) * mask)
    masks = {
        "attention_mask": attention_mask,
        "is_index_masked": attention_mask < 0,
        "is_index_global_attn": attention_mask > 0,
        "is_global_attn": bool((attention_mask > 0).any()),
    }
    results = []
    for layer in (reference, fused):
        hidden = torch.randn(2, length, 32, generator=torch.Generator().manual_seed(2), requires_grad=True)
        out = layer(hidden, **masks)[0]
        out.backward(torch.randn(out.shape, generator=torch.Generator().manual_seed(3)))
        results.append((out, hidden.grad))
    torch.testing.assert_close(results[1][0], results[0][0], **TOLERANCE)
    torch.testing.assert_close(results[1][1], results[0][1], **TOLERANCE)


@pytest.mark.parametrize("pattern", ["cls", "several"])
def test_in_training_mode_with_dropout_that_drops_nothing_it_computes_hugging_faces_step(pattern):
    """Training mode takes the dropout paths (on the CPU, ``_WindowAttentionWithDropout``); with a
    probability too small to drop anything they must give Hugging Face's outputs and gradients."""
    reference, fused = hf_and_fused(tiny_config(8, dropout=1e-12))
    reference.train(), fused.train()
    ids, mask = padded_batch(3, 45)
    globals_ = global_mask(pattern, 3, 45)
    expected, expected_grads = forward_backward(reference, ids, mask, globals_)
    got, got_grads = forward_backward(fused, ids, mask, globals_)
    torch.testing.assert_close(got, expected, **TOLERANCE)
    for name, grad in expected_grads.items():
        torch.testing.assert_close(got_grads[name], grad, **TOLERANCE, msg=lambda m, name=name: f"{name}: {m}")


@pytest.mark.parametrize("pattern", ["cls", "several"])
def test_under_bf16_autocast_it_computes_what_it_does_in_fp32_within_bf16s_precision(pattern):
    """``train.bf16`` on a CPU that computes bf16 (a GPU's autocast the same): the global rows come
    out of their own projections in another precision than the window's and are put back in its."""
    _, fused = hf_and_fused(tiny_config(window=8))
    ids, mask = padded_batch(2, 48)
    globals_ = global_mask(pattern, 2, 48)
    plain, plain_grads = forward_backward(fused, ids, mask, globals_)
    with bf16_autocast(torch.device("cpu"), True):
        low, low_grads = forward_backward(fused, ids, mask, globals_)
    assert torch.equal(low, plain) != cpu_computes_bf16()  # autocast ran the layers in bf16 where it can
    assert torch.allclose(low.float(), plain, rtol=0.05, atol=0.05)
    flat = [torch.cat([grads[name].flatten() for name in plain_grads]).double() for grads in (low_grads, plain_grads)]
    assert torch.nn.functional.cosine_similarity(*flat, dim=0) > 0.999


def test_dropout_acts_on_the_attention_probabilities():
    """With the same draw, the CPU training path equals softmax, then dropout, then the values,
    in plain autograd ops: outputs and gradients."""
    window, block, heads, dim, length, slots, p = 4, 4, 2, 8, 16, 2, 0.3
    generator = torch.Generator().manual_seed(4)
    query = torch.randn(2, length // block, heads, block, dim, generator=generator)
    key, value = (torch.randn(2, length, heads, dim, generator=generator) for _ in range(2))
    key_global, value_global = (torch.randn(2, heads, slots, dim, generator=generator) for _ in range(2))
    mask = torch.zeros(2, length // block, 1, block, block + 2 * window + slots)
    mask[..., 0] = float("-inf")  # some masked keys, as padding and the band give
    mask[1, ..., -1] = float("-inf")
    inputs = [t.requires_grad_() for t in (query, key, value, key_global, value_global)]
    grad_out = torch.randn(2, length // block, heads, block, dim, generator=generator)

    torch.manual_seed(5)
    got = _WindowAttentionWithDropout.apply(*inputs, mask, p, window)
    got.backward(grad_out)
    got_grads = [t.grad.clone() for t in inputs]
    for t in inputs:
        t.grad = None

    torch.manual_seed(5)
    keys = _window_blocks(key, window, block, key_global)
    probs = torch.softmax(query @ keys.transpose(-1, -2) + mask, -1)
    keep = torch.empty(probs.shape, dtype=torch.bool).bernoulli_(1 - p)
    assert 0 < keep.float().mean() < 1
    expected = (probs * keep / (1 - p)) @ _window_blocks(value, window, block, value_global)
    expected.backward(grad_out)
    torch.testing.assert_close(got, expected, **TOLERANCE)
    for got_grad, t in zip(got_grads, inputs):
        torch.testing.assert_close(got_grad, t.grad, **TOLERANCE)


def test_training_with_dropout_runs_and_gives_finite_gradients():
    _, fused = hf_and_fused(tiny_config(8, dropout=0.1))
    fused.train()
    ids, mask = padded_batch(3, 45)
    first, grads = forward_backward(fused, ids, mask, global_mask("several", 3, 45))
    second, _ = forward_backward(fused, ids, mask, global_mask("several", 3, 45))
    assert all(torch.isfinite(g).all() for g in grads.values()) and len(grads) == len(list(fused.parameters()))
    assert torch.isfinite(first).all() and not torch.allclose(first, second)  # dropout draws differ


def test_attention_probabilities_come_from_hugging_faces_computation():
    reference, fused = hf_and_fused(tiny_config(8))
    ids, mask = padded_batch(2, 40)
    globals_ = global_mask("cls", 2, 40)
    with torch.no_grad():
        expected = reference(ids, attention_mask=mask, global_attention_mask=globals_, output_attentions=True)
        got = fused(ids, attention_mask=mask, global_attention_mask=globals_, output_attentions=True)
    for name in ("last_hidden_state", "attentions", "global_attentions"):
        torch.testing.assert_close(got[name], expected[name], **TOLERANCE)


def test_a_model_with_it_saves_a_plain_longformer(tmp_path):
    _, fused = hf_and_fused(tiny_config(8))
    fused.save_pretrained(tmp_path, safe_serialization=True)
    reloaded = AutoModel.from_pretrained(tmp_path, add_pooling_layer=False).eval()
    assert type(reloaded.encoder.layer[0].attention.self) is LongformerSelfAttention
    assert reloaded.state_dict().keys() == fused.state_dict().keys()
    for name, tensor in fused.state_dict().items():
        assert torch.equal(reloaded.state_dict()[name], tensor), name
    ids, mask = padded_batch(2, 30)
    with torch.no_grad():
        torch.testing.assert_close(
            fused(ids, attention_mask=mask).last_hidden_state,
            reloaded(ids, attention_mask=mask).last_hidden_state,
            **TOLERANCE,
        )


def test_the_converted_minilm_loads_with_it_and_computes_hugging_faces_step(minilm_dir, tmp_path):
    """doctune's loading point gives a converted model the fused attention (with and without its
    MLM head); on MiniLM's weights it computes what Hugging Face's attention computes."""
    converted = convert_to_longformer(minilm_dir, str(tmp_path / "lf"), 1024, 128)
    model, tokenizer = load_encoder(str(converted))
    with_head, _ = load_encoder(str(converted), with_mlm_head=True, new_head=True)
    for loaded in (model, with_head):
        assert {type(m) for m in loaded.modules() if isinstance(m, LongformerSelfAttention)} == {
            FusedLongformerSelfAttention
        }
    reference = AutoModel.from_pretrained(converted, add_pooling_layer=False)
    model.eval()
    batch = tokenizer(["word " * 700, "a shorter text " * 40], padding=True, return_tensors="pt")
    states = []
    for encoder in (reference, model):
        encoder.zero_grad(set_to_none=True)
        hidden = encode(encoder, batch["input_ids"], batch["attention_mask"])
        hidden.pow(2).mean().backward()
        states.append((hidden, encoder.encoder.layer[2].attention.self.query.weight.grad))
    torch.testing.assert_close(states[1][0], states[0][0], **TOLERANCE)
    torch.testing.assert_close(states[1][1], states[0][1], **TOLERANCE)


def test_a_bert_is_loaded_as_it_is(minilm_dir):
    model, _ = load_encoder(minilm_dir)
    assert not any(isinstance(m, FusedLongformerSelfAttention) for m in model.modules())
