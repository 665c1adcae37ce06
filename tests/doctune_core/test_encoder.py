"""Embedding texts: truncation and chunk-and-pool of long inputs."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from doctune_core.encoder import (
    bf16_autocast,
    computed_widths,
    cpu_computes_bf16,
    embed_in_length_groups,
    embed_texts,
    encode,
    load_encoder,
    over_length_share,
    pool,
    token_windows,
    tokenize,
)

SHORT = "The committee approved the budget after a long debate."
LONG = " ".join(f"Sentence {i} reports what the council decided about road number {i}." for i in range(40))


@pytest.fixture(scope="module")
def minilm(minilm_dir):
    return load_encoder(minilm_dir)


def _reference(model, tokenizer, texts: list[str], max_length: int, pooling: str) -> np.ndarray:
    """The plain path: the tokenizer truncates, one forward pass."""
    batch = tokenize(tokenizer, texts, max_length)
    with torch.no_grad():
        hidden = encode(model, batch["input_ids"], batch["attention_mask"])
    return F.normalize(pool(hidden, batch["attention_mask"], pooling), dim=-1).numpy()


@pytest.mark.parametrize("pooling", ["mean", "cls", "max"])
def test_truncation_matches_the_tokenizers_own(minilm, pooling):
    got = embed_texts(*minilm, [LONG, SHORT, ""], pooling=pooling, max_length=48, batch_size=2)
    np.testing.assert_allclose(got, _reference(*minilm, [LONG, SHORT, ""], 48, pooling), atol=1e-5)


def test_chunking_averages_the_windows_weighted_by_their_tokens(minilm):
    model, tokenizer = minilm
    windows, owners = token_windows(tokenizer, [SHORT, LONG], 64, "chunk")
    assert owners[0] == 0 and set(owners[1:]) == {1} and len(windows) > 3
    assert all(len(w) <= 64 and w[0] == tokenizer.cls_token_id and w[-1] == tokenizer.sep_token_id for w in windows)
    body = [t for w in windows[1:] for t in w[1:-1]]
    assert body == tokenizer(LONG, add_special_tokens=False)["input_ids"]  # every token, once, in order

    chunked = embed_texts(model, tokenizer, [SHORT, LONG], pooling="mean", max_length=64, long_inputs="chunk")
    truncated = embed_texts(model, tokenizer, [SHORT, LONG], pooling="mean", max_length=64)
    np.testing.assert_allclose(chunked[0], truncated[0], atol=1e-6)  # a short text is one window
    with torch.no_grad():
        vectors = []
        for window in windows[1:]:
            ids = torch.tensor([window])
            mask = torch.ones_like(ids)
            vectors.append(pool(encode(model, ids, mask), mask, "mean")[0] * len(window))
    expected = F.normalize(torch.stack(vectors).sum(0), dim=-1).numpy()
    np.testing.assert_allclose(chunked[1], expected, atol=1e-5)
    assert not np.allclose(chunked[1], truncated[1], atol=1e-3)


def test_over_length_share_counts_special_tokens(minilm):
    _, tokenizer = minilm
    tokens = len(tokenizer(SHORT)["input_ids"])
    assert over_length_share(tokenizer, [SHORT, LONG], tokens) == 0.5
    assert over_length_share(tokenizer, [SHORT, LONG], tokens - 1) == 1.0
    assert over_length_share(tokenizer, [], 8) == 0.0
    with pytest.raises(ValueError, match="unknown long_inputs"):
        token_windows(tokenizer, [SHORT], 8, "summarise")


@pytest.mark.parametrize("padding_side", ["right", "left"])
def test_length_groups_give_one_forwards_embeddings_in_the_batchs_order(minilm_dir, padding_side):
    model, tokenizer = load_encoder(minilm_dir)
    tokenizer.padding_side = padding_side
    words = LONG.split()
    texts = [" ".join(words[: 3 + 7 * i]) for i in (5, 0, 9, 2, 7, 1, 4, 8, 3, 6)]  # lengths shuffled
    batch = tokenize(tokenizer, texts, 96)
    with torch.no_grad():
        one = pool(encode(model, batch["input_ids"], batch["attention_mask"]), batch["attention_mask"], "mean")
        grouped = embed_in_length_groups(model, batch["input_ids"], batch["attention_mask"], "mean", groups=3)
    torch.testing.assert_close(grouped, one, atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize("groups", [1, 3])
def test_computed_widths_are_the_widths_the_forwards_run_at(minilm_dir, groups):
    model, tokenizer = load_encoder(minilm_dir)
    words = LONG.split()
    texts = [" ".join(words[: 3 + 7 * i]) for i in (5, 0, 9, 2, 7, 1, 4, 8, 3, 6)]
    batch = tokenize(tokenizer, texts, 96)
    seen = []  # (rows, width) of every forward
    hook = model.register_forward_pre_hook(
        lambda _, args, kwargs: seen.append(tuple(kwargs["input_ids"].shape)), with_kwargs=True
    )
    with torch.no_grad():
        embed_in_length_groups(model, batch["input_ids"], batch["attention_mask"], "mean", groups=groups)
    hook.remove()
    widths = computed_widths(batch["attention_mask"], groups)
    assert len(seen) == groups
    assert sorted(widths) == sorted(width for rows, width in seen for _ in range(rows))
    if groups > 1:  # the padding the batch's width holds is mostly not computed
        assert sum(widths) < 0.8 * batch["input_ids"].numel()
    assert all(w >= n for w, n in zip(widths, batch["attention_mask"].sum(1).tolist(), strict=True))


def test_length_groups_carry_gradients_to_every_row(minilm_dir):
    model, tokenizer = load_encoder(minilm_dir)
    batch = tokenize(tokenizer, [SHORT, LONG, SHORT + " Again.", LONG[:200]], 64)
    grouped = embed_in_length_groups(model, batch["input_ids"], batch["attention_mask"], "cls", groups=2)
    grouped.sum().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.encoder.parameters())


def test_train_bf16_runs_linear_layers_in_bf16_on_a_cpu_that_computes_it_and_in_fp32_on_one_that_does_not():
    layer, cpu = torch.nn.Linear(8, 8), torch.device("cpu")
    with bf16_autocast(cpu, True):
        on = layer(torch.ones(2, 8))
    with bf16_autocast(cpu, False):
        off = layer(torch.ones(2, 8))
    assert on.dtype == (torch.bfloat16 if cpu_computes_bf16() else torch.float32) and off.dtype == torch.float32
    assert torch.allclose(on.float(), off, rtol=0.02, atol=0.02)


def test_embeddings_under_bf16_agree_with_fp32_where_the_cpu_computes_bf16_and_equal_them_elsewhere(minilm):
    texts = [SHORT, LONG, "A shorter note on the same council.", LONG[:300]]
    fp32 = embed_texts(*minilm, texts, pooling="mean", max_length=128, long_inputs="chunk")
    bf16 = embed_texts(*minilm, texts, pooling="mean", max_length=128, long_inputs="chunk", bf16=True)
    assert bf16.dtype == np.float32 and np.allclose(np.linalg.norm(bf16, axis=1), 1.0, atol=1e-5)
    if cpu_computes_bf16():  # computed in bf16: near the fp32 vectors, not equal to them
        assert not np.array_equal(bf16, fp32) and (bf16 * fp32).sum(1).min() > 0.99
    else:  # autocast computes nothing in bf16 here
        assert np.array_equal(bf16, fp32)
