"""A Longformer made from the embedded BERT-like encoder."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModel

from doctune_core.encoder import ModelUnavailable, encode, has_mlm_head, load_encoder, pool, tokenize
from doctune_core.longformer import convert_to_longformer


@pytest.fixture(scope="module")
def converted(minilm_dir, tmp_path_factory):
    return convert_to_longformer(minilm_dir, str(tmp_path_factory.mktemp("lf") / "model"), 4096, 256)


def test_with_a_window_covering_the_input_it_embeds_exactly_as_the_original(minilm_dir, converted):
    bert, tokenizer = load_encoder(minilm_dir)
    longformer, _ = load_encoder(str(converted))
    bert.eval(), longformer.eval()
    texts = ["a short document about the weather in spring.", "another one, longer than the first one is."]
    batch = tokenize(tokenizer, texts, 64)
    with torch.no_grad():
        expected = pool(encode(bert, batch["input_ids"], batch["attention_mask"]), batch["attention_mask"], "mean")
        got = pool(encode(longformer, batch["input_ids"], batch["attention_mask"]), batch["attention_mask"], "mean")
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


def test_it_is_a_plain_longformer_directory_with_copied_positions_and_global_projections(converted):
    model = AutoModel.from_pretrained(converted)
    assert type(model).__name__ == "LongformerModel"
    assert model.config.max_position_embeddings == 4096 + 1 and model.config.attention_window == [256] * 6
    positions = model.embeddings.position_embeddings.weight
    torch.testing.assert_close(positions[1 + 512 : 1 + 1024], positions[1 : 1 + 512])  # block by block
    torch.testing.assert_close(positions[1 + 3584 : 1 + 4096], positions[1 : 1 + 512])
    attention = model.encoder.layer[3].attention.self
    torch.testing.assert_close(attention.query_global.weight, attention.query.weight)
    torch.testing.assert_close(attention.value_global.bias, attention.value.bias)


def test_it_runs_at_4096_tokens(converted):
    longformer, tokenizer = load_encoder(str(converted))
    longformer.eval()
    batch = tokenize(tokenizer, ["word " * 5000], 4096)
    assert batch["input_ids"].shape == (1, 4096)
    with torch.no_grad():
        hidden = encode(longformer, batch["input_ids"], batch["attention_mask"])
    assert hidden.shape == (1, 4096, 384) and torch.isfinite(hidden).all()


def test_an_odd_window_is_refused(minilm_dir, tmp_path):
    with pytest.raises(ValueError, match="must be even"):
        convert_to_longformer(minilm_dir, str(tmp_path / "x"), 1024, 255)


def test_a_new_masked_lm_head_starts_finite(converted):
    model, _ = load_encoder(str(converted), with_mlm_head=True, new_head=True)  # what head training starts from
    assert all(torch.isfinite(p).all() for p in model.parameters())


def test_a_base_with_a_masked_lm_head_keeps_it_through_the_conversion(minilm_dir, tmp_path):
    """The MLM head of an MLM-pretrained base (doctune's vanilla base, any BERT) is converted with
    the encoder: with a window covering the input, the converted model predicts masked tokens
    exactly as the original does."""
    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM

    tokenizer = AutoTokenizer.from_pretrained(minilm_dir)
    torch.manual_seed(0)
    bert = BertForMaskedLM(
        BertConfig(
            vocab_size=len(tokenizer),
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=64,
            max_position_embeddings=64,
        )
    )
    with torch.no_grad():  # a head that is visibly not the fresh one: trained weights, not zeros and ones
        for parameter in bert.cls.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.5)
    bert.save_pretrained(tmp_path / "bert")
    tokenizer.save_pretrained(tmp_path / "bert")
    converted = convert_to_longformer(str(tmp_path / "bert"), str(tmp_path / "lf"), 256, 64)
    assert has_mlm_head(str(tmp_path / "bert")) and has_mlm_head(str(converted))
    longformer, _ = load_encoder(str(converted), with_mlm_head=True)
    assert type(longformer).__name__ == "LongformerForMaskedLM"
    assert type(AutoModel.from_pretrained(converted)).__name__ == "LongformerModel"  # the encoder still loads alone
    bert.eval(), longformer.eval()
    batch = tokenize(tokenizer, [f"the weather in {tokenizer.mask_token} was mild."], 32)
    with torch.no_grad():
        expected = bert.cls(encode(bert.bert, batch["input_ids"], batch["attention_mask"]))
        got = longformer.lm_head(encode(longformer.longformer, batch["input_ids"], batch["attention_mask"]))
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)


def test_a_base_without_one_is_refused_where_an_mlm_term_needs_its_head(converted):
    assert not has_mlm_head(str(converted))  # all-MiniLM-L6-v2 ships its encoder only
    with pytest.raises(ModelUnavailable, match="has no trained masked-LM head"):
        load_encoder(str(converted), with_mlm_head=True)
