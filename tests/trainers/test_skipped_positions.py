"""Short training inputs read at long texts' positions (PoSE): they teach a converted Longformer's new
position rows, and with ``trainable: positions`` every text the base could read embeds as before."""

from __future__ import annotations

import pytest
import torch

from doctune_core.encoder import encode, pool
from doctune_core.longformer import base_position_rows, cached_longformer, first_new_position
from doctune_core.position_interpolation import position_ids
from trainers.model import build_module
from trainers.settings import TrialSettings
from trainers.skipped_positions import batch_position_ids, skipped_position_ids
from trainers.trainable import parameter_groups
from trainers.training_loss import training_loss

SHORT = [f"The council met on day {i} and decided about road number {i} before the vote." for i in range(8)]
OFFSET, LENGTH, SCALE = 2, 4096, 8  # a MiniLM converted to 4,096 interpolated positions


def _mask(lengths: list[int]) -> torch.Tensor:
    width = max(lengths)
    return torch.tensor([[1] * n + [0] * (width - n) for n in lengths])


def test_a_skipped_row_reads_a_longer_texts_positions_in_order_and_its_first_token_first():
    mask = _mask([5, 100, 512, 300])
    ids = skipped_position_ids(mask, SCALE, OFFSET, LENGTH, 4096, torch.Generator().manual_seed(0))
    plain = position_ids(mask, SCALE, OFFSET, LENGTH)
    assert torch.equal(ids[:, 0], plain[:, 0])  # [CLS] at the first position
    assert torch.equal(ids[mask == 0], plain[mask == 0])  # padding reads the padding row
    for row, n in enumerate(mask.sum(1).tolist()):
        real = ids[row, :n]
        assert bool((real[1:] >= real[:-1]).all()) and int(real.max()) < OFFSET + LENGTH
    # read as parts of longer texts, the rows reach the rows between the base's (every 8th)
    assert ((ids[mask == 1] - OFFSET) % SCALE != 0).any()
    # a row that may be no longer than it is reads exactly as it would unskipped
    same = skipped_position_ids(mask, SCALE, OFFSET, LENGTH, 5, torch.Generator().manual_seed(0))
    assert torch.equal(same[0], plain[0])
    # the draws are the seed's: a step resumed reads the same positions
    again = skipped_position_ids(mask, SCALE, OFFSET, LENGTH, 4096, torch.Generator().manual_seed(0))
    assert torch.equal(ids, again)


def test_with_copied_positions_a_skipped_row_steps_one_row_a_token_past_its_skip():
    mask = _mask([64])
    ids = skipped_position_ids(mask, 1, OFFSET, LENGTH, 4096, torch.Generator().manual_seed(3))[0]
    steps = (ids[1:] - ids[:-1]).tolist()
    assert sorted(set(steps)) in ([1], sorted({1, max(steps)}))  # one skip at most, every other step one row
    assert int(ids[-1]) > OFFSET + 63  # skipped ahead (this seed's draw)


@pytest.fixture(scope="module")
def converted(minilm_dir, tmp_path_factory) -> str:
    return str(cached_longformer(minilm_dir, 1024, 64, tmp_path_factory.mktemp("cache")))


def _embedded(model, batch) -> torch.Tensor:
    model.eval()
    with torch.no_grad():
        return pool(encode(model, batch["input_ids"], batch["attention_mask"]), batch["attention_mask"], "mean")


def _trained(converted: str, skipped: int) -> tuple[torch.Tensor, torch.Tensor, object, object]:
    """The interpolated start's position table and short texts' embeddings, then three AdamW steps of
    ``trainable: positions`` on short views, read at positions of texts up to ``skipped`` tokens (0: as read)."""
    hp = TrialSettings(trainable="positions", position_init="interpolate", mlm_weight=0.0, lr=1e-2)
    module, tokenizer = build_module(converted, hp)
    batch = tokenizer(SHORT, padding=True, return_tensors="pt")
    assert batch["input_ids"].shape[1] < 64  # far below the base's 512 positions
    table = module.encoder.embeddings.position_embeddings.weight
    before, embedded = table.detach().clone(), _embedded(module.encoder, batch)
    module.train()
    optimizer = torch.optim.AdamW(parameter_groups(module, hp.trainable, hp.weight_decay), lr=hp.lr)
    for step in range(3):
        inputs = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
        if skipped:
            config = module.encoder.config
            inputs["position_ids"] = batch_position_ids(config, batch["attention_mask"], len(SHORT), skipped, step)
        training_loss(hp, module(**inputs))[0].backward()
        optimizer.step()
        optimizer.zero_grad()
    return before, embedded, module, batch


@pytest.mark.slow  # a conversion and six steps of a MiniLM Longformer
def test_skipped_positions_teach_the_new_rows_and_short_texts_embed_bit_for_bit_as_before(converted):
    before, embedded, module, batch = _trained(converted, skipped=1024)
    after = module.encoder.embeddings.position_embeddings.weight.detach()
    base = base_position_rows(module.model, first_new_position(converted))
    assert torch.equal(before[base], after[base]) and not torch.equal(before[~base], after[~base])
    assert torch.equal(_embedded(module.encoder, batch), embedded)  # bit for bit
    # read as they are, the same short views never reach a new row: nothing to learn there
    before, _, module, _ = _trained(converted, skipped=0)
    assert torch.equal(before, module.encoder.embeddings.position_embeddings.weight.detach())
