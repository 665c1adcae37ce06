"""Interpolated positions (LongEmbed's PI): the base's rows land on every s-th row, and a text the
base could read is embedded exactly as with the copied positions."""

from __future__ import annotations

import pytest
import torch

from doctune_core.encoder import embed_texts, load_encoder
from doctune_core.longformer import (
    base_position_rows,
    cached_interpolated,
    cached_longformer,
    check_interpolable,
    first_new_position,
)
from doctune_core.position_interpolation import CONFIG_KEY, interpolated_rows, position_ids

SENTENCE = "The council met on Tuesday to decide about road number {i} and its repairs."


def test_the_base_rows_land_on_every_s_th_row_and_the_rows_between_blend_them():
    base = torch.randn(4, 3)
    rows = interpolated_rows(base, 16)
    torch.testing.assert_close(rows[::4], base)
    torch.testing.assert_close(rows[2], (base[0] + base[1]) / 2)
    torch.testing.assert_close(rows[13:], base[3].expand(3, 3))  # past the last learned row: that row


def test_a_text_the_base_could_read_reads_its_rows_and_a_longer_one_spans_the_table():
    mask = torch.zeros(3, 12, dtype=torch.long)
    mask[0, :4] = 1  # 4 tokens, padded on the right
    mask[1, 8:] = 1  # 4 tokens, padded on the left
    mask[2, :] = 1  # 12 tokens: longer than the base's 4 positions
    ids = position_ids(mask, scale=4, offset=1, length=16)
    assert ids[0].tolist() == [1, 5, 9, 13] + [0] * 8
    assert ids[1].tolist() == [0] * 8 + [1, 5, 9, 13]
    assert ids[2, 0] == 1 and ids[2, -1] == 1 + 14 and (ids[2].diff() > 0).all()  # floor(11 * 16 / 12) = 14


def test_a_length_the_base_positions_do_not_divide_is_refused(minilm_dir, tmp_path):
    with pytest.raises(ValueError, match="multiple of the base's 512 positions; got 1000"):
        check_interpolable(cached_longformer(minilm_dir, 1000, 64, tmp_path))


@pytest.fixture(scope="module")
def conversions(minilm_dir, tmp_path_factory) -> tuple[str, str]:
    copied = cached_longformer(minilm_dir, 2048, 64, tmp_path_factory.mktemp("cache"))
    return str(copied), str(cached_interpolated(copied))


def test_short_texts_embed_as_with_copied_positions_and_long_ones_do_not(conversions):
    copied, interpolated = (load_encoder(path)[0] for path in conversions)
    tokenizer = load_encoder(conversions[0])[1]
    assert getattr(interpolated.config, CONFIG_KEY) == 4 and not getattr(copied.config, CONFIG_KEY, None)
    short = ["a short note.", " ".join(SENTENCE.format(i=i) for i in range(30))]  # about 10 and 480 tokens
    assert len(tokenizer(short[1])["input_ids"]) <= 512
    kwargs = {"pooling": "mean", "max_length": 2048, "batch_size": 2}
    torch.testing.assert_close(
        torch.from_numpy(embed_texts(interpolated, tokenizer, short, **kwargs)),
        torch.from_numpy(embed_texts(copied, tokenizer, short, **kwargs)),
        rtol=1e-5,
        atol=1e-5,
    )
    long = [" ".join(SENTENCE.format(i=i) for i in range(100))]  # about 1,600 tokens
    cosine = (embed_texts(interpolated, tokenizer, long, **kwargs) @ embed_texts(copied, tokenizer, long, **kwargs).T)[
        0, 0
    ]
    assert cosine < 0.9999  # the positions past 512 differ


def test_the_base_rows_of_an_interpolated_table_are_every_fourth_after_the_padding_row(conversions):
    model, _ = load_encoder(conversions[1])
    rows = base_position_rows(model, first_new_position(conversions[1]))
    assert rows.sum() == 1 + 512 and rows[0] and rows[1] and rows[5] and not rows[2] and not rows[512]
