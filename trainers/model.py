"""The module a trial trains (``build_module``): the encoder with its pooling, its loss heads and,
where the MLM term has a weight, its masked-LM head, in one ``forward`` that DDP synchronises."""

from __future__ import annotations

import torch
import torch.nn as nn

from doctune_core.encoder import embed_in_length_groups, load_encoder
from doctune_core.longformer import base_position_rows, first_new_position, interpolate_positions
from trainers.config import Hyperparameters
from trainers.losses import masked_lm_loss
from trainers.trainable import freeze_for
from trainers.training_loss import LossHeads


class ContrastiveModel(nn.Module):
    """Both views in one encoder forward, the loss heads, and the MLM forward when its weight is
    non-zero. Everything goes through this one ``forward`` so DDP sees (and synchronises) every
    gradient."""

    def __init__(self, model: nn.Module, pooling: str, with_mlm: bool, heads: LossHeads | None = None) -> None:
        super().__init__()
        self.model = model
        self.pooling = pooling
        self.with_mlm = with_mlm
        self.heads = heads

    @property
    def encoder(self) -> nn.Module:
        return self.model.base_model if self.with_mlm else self.model

    @staticmethod
    def length_groups(input_ids: torch.Tensor) -> int:
        """How many forwards ``embed`` splits a batch into. On the CPU, rows of similar length share a
        forward (at least 8 rows each, at most 4 forwards): fewer padded positions computed. On a GPU
        one forward: a small encoder's step is bound by kernel launches there, and each group adds a
        forward's launches and a sync (bench/RESULTS.md at cf730cc, "Training on a GPU")."""
        return 1 if input_ids.is_cuda else min(4, input_ids.shape[0] // 8)

    def embed(self, input_ids, attention_mask, position_ids=None):
        groups = self.length_groups(input_ids)
        return embed_in_length_groups(self.encoder, input_ids, attention_mask, self.pooling, groups, position_ids)

    def mlm_loss(self, input_ids, attention_mask, labels):
        return masked_lm_loss(self.model, input_ids, attention_mask, labels)

    def forward(
        self,
        input_ids,
        attention_mask,
        mlm_input_ids=None,
        mlm_labels=None,
        mlm_attention_mask=None,
        anchor_targets=None,
        position_ids=None,
    ):
        outputs = {"embeddings": self.embed(input_ids, attention_mask, position_ids)}
        if anchor_targets is not None:  # the anchor term's (its texts are the batch's last rows)
            outputs["anchor_targets"] = anchor_targets
        if self.heads is not None:
            outputs |= self.heads(outputs["embeddings"])
        if mlm_labels is not None:
            outputs["mlm_loss"] = self.mlm_loss(mlm_input_ids, mlm_attention_mask, mlm_labels)
        return outputs


def build_module(
    model_dir: str, hp: Hyperparameters, gradient_checkpointing: bool = False
) -> tuple[ContrastiveModel, object]:
    """The trainable module for one trial (encoder, loss heads, MLM head if used), in train mode."""
    with_mlm = hp.mlm_weight > 0
    model, tokenizer = load_encoder(model_dir, with_mlm_head=with_mlm)
    if gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    first_new = first_new_position(model_dir)
    if hp.position_init == "interpolate":
        interpolate_positions(model, first_new)
    freeze_for(model, hp.trainable, base_position_rows(model, first_new))  # before DDP: frozen is never synced
    encoder = model.base_model if with_mlm else model
    module = ContrastiveModel(model, hp.pooling, with_mlm, LossHeads(hp, encoder.config.hidden_size))
    module.train()  # from_pretrained returns eval mode: no dropout, which SimCSE-style views rely on
    return module, tokenizer
