"""The GPU path of a training step: bf16 autocast, both views in one forward, MLM term."""

from __future__ import annotations

import pytest
import torch

from trainers.encoder import load_encoder, tokenize
from trainers.loop import ContrastiveModel
from trainers.losses import info_nce, mask_tokens

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU; this machine has none"),
]


def test_bf16_step_on_gpu_is_finite_and_updates_weights(minilm_dir):
    model, tokenizer = load_encoder(minilm_dir, with_mlm_head=True)
    module = ContrastiveModel(model, "mean", with_mlm=True).cuda()
    optimizer = torch.optim.AdamW(module.parameters(), lr=1e-4)
    texts = ["first view of a document.", "a second, different document.", "view b one.", "view b two."]
    batch = tokenize(tokenizer, texts, 64)
    masked, labels = mask_tokens(
        batch["input_ids"][:2], batch["special_tokens_mask"][:2], tokenizer.mask_token_id, len(tokenizer)
    )
    before = module.encoder.embeddings.word_embeddings.weight.detach().clone()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        embeddings, mlm = module(
            batch["input_ids"].cuda(),
            batch["attention_mask"].cuda(),
            masked.cuda(),
            labels.cuda(),
            batch["attention_mask"][:2].cuda(),
        )
    loss = info_nce(embeddings[:2], embeddings[2:], 0.05) + 0.1 * mlm
    loss.backward()
    optimizer.step()
    assert torch.isfinite(loss)
    assert not torch.equal(before, module.encoder.embeddings.word_embeddings.weight.detach())
