"""Masked-language-model auxiliary term: BERT's masking rule.

``mask_tokens(input_ids, special_tokens_mask, mask_token_id, vocab_size)`` picks 15% of the real
(non-special, non-padding) tokens of ``input_ids`` (shape ``(N, L)``); of those, 80% become
``[MASK]``, 10% a random vocabulary token, 10% stay unchanged. Returns ``(masked_ids, labels)``
of shape ``(N, L)`` with ``labels = -100`` everywhere except the picked positions, so a masked-LM
head's cross-entropy with ``ignore_index=-100`` is the auxiliary loss; the training loss is
``contrastive + mlm_weight * mlm``.

Paper: Devlin et al., BERT (NAACL 2019), Sec. 3.1; used as an auxiliary term by SimCSE (Gao et
al. 2021, Appendix) and DocSplit (weight 0.1).
"""

from __future__ import annotations

import torch

MASK_PROBABILITY = 0.15  # BERT, Sec. 3.1
REPLACE_WITH_MASK = 0.8
REPLACE_WITH_RANDOM = 0.1  # of the picked tokens; the remaining 10% stay as they are


def mask_tokens(
    input_ids: torch.Tensor,
    special_tokens_mask: torch.Tensor,
    mask_token_id: int,
    vocab_size: int,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``special_tokens_mask`` is 1 where a token must never be picked (special tokens, padding)."""
    probs = torch.full(input_ids.shape, MASK_PROBABILITY)
    probs.masked_fill_(special_tokens_mask.bool().cpu(), 0.0)
    picked = torch.bernoulli(probs, generator=generator).bool().to(input_ids.device)
    labels = torch.where(picked, input_ids, torch.full_like(input_ids, -100))
    masked = input_ids.clone()
    draw = torch.rand(input_ids.shape, generator=generator).to(input_ids.device)
    to_mask = picked & (draw < REPLACE_WITH_MASK)
    to_random = picked & (draw >= REPLACE_WITH_MASK) & (draw < REPLACE_WITH_MASK + REPLACE_WITH_RANDOM)
    masked[to_mask] = mask_token_id
    random_ids = torch.randint(vocab_size, input_ids.shape, generator=generator).to(input_ids.device)
    masked[to_random] = random_ids[to_random]
    return masked, labels
