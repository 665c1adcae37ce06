"""Masked-language-model auxiliary term: BERT's masking rule.

``mask_tokens(input_ids, special_tokens_mask, mask_token_id, vocab_size)`` picks 15% of the real
(non-special, non-padding) tokens of ``input_ids`` (shape ``(N, L)``); of those, 80% become
``[MASK]``, 10% a random vocabulary token, 10% stay unchanged. Returns ``(masked_ids, labels)``
of shape ``(N, L)`` with ``labels = -100`` everywhere except the picked positions, so a masked-LM
head's cross-entropy with ``ignore_index=-100`` is the auxiliary loss; the training loss is
``contrastive + mlm_weight * mlm``.

``masked_lm_loss(model, input_ids, attention_mask, labels)`` is that cross-entropy, the mean over
the labelled positions, for a ``*ForMaskedLM`` model, with its prediction head applied to the
labelled positions only (as fairseq's RoBERTa trainer does): the other 85% carry no label, and
their vocabulary projection costs about as much as a small encoder's forward (BERT-Mini: 4.1
MFLOP a position against the encoder's 6.3; MiniLM-L6: 23 against 21). Equal to the model's own
``loss`` (tested for BERT, Longformer and RoBERTa heads); a model whose head is not one module
beside its encoder (``prediction_head``) gets the model's own computation.

Paper: Devlin et al., BERT (NAACL 2019), Sec. 3.1; used as an auxiliary term by SimCSE (Gao et
al. 2021, Appendix) and DocSplit (weight 0.1).
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from doctune_core.encoder import position_inputs

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


def prediction_head(model: nn.Module) -> nn.Module | None:
    """A ``*ForMaskedLM`` model's prediction head when it is one position-wise module beside the
    encoder (BERT's ``cls``; RoBERTa's, Longformer's and their kin's ``lm_head``), else None."""
    others = [module for module in model.children() if module is not model.base_model]
    return others[0] if len(others) == 1 else None


def masked_lm_loss(
    model: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor, labels: torch.Tensor
) -> torch.Tensor:
    """Mean cross-entropy over the labelled (``labels != -100``) positions of ``input_ids`` (N, L);
    a zero that keeps every gradient defined when nothing is labelled."""
    head = prediction_head(model)
    positions = position_inputs(model.config, attention_mask)  # interpolated positions read as in encode
    if head is None:
        return model(input_ids=input_ids, attention_mask=attention_mask, labels=labels, **positions).loss
    hidden = model.base_model(input_ids=input_ids, attention_mask=attention_mask, **positions).last_hidden_state
    picked = labels != -100
    logits = head(hidden[picked])
    if logits.shape[0] == 0:
        return logits.sum() * 0.0
    return F.cross_entropy(logits.float(), labels[picked])
