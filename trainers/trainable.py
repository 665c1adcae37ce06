"""Which of the encoder's parameters a trial trains (``trainable``), and its optimizer's groups.

- ``all``: every parameter (the seed papers' recipes);
- ``positions``: the converted Longformer's new position rows alone, every other weight of the
  encoder and its MLM head frozen: LongEmbed's tuning of an absolute-position encoder (Zhu et al.
  2024, Sec. 4.2 and Fig. 4: "freeze the original model parameters while updating only the newly
  added position embeddings"). The base's own rows stay as they were (copied or interpolated,
  ``position_init``), so an input of as many tokens as the base read (512 for the MiniLM) is
  embedded exactly as before;
- ``positions+top``: those rows and the top ``TOP_LAYERS`` transformer layers.

The loss heads (SimSiam's predictor, the Bregman sub-networks) always train. Frozen parameters
have ``requires_grad`` off before the module is wrapped for data parallelism, so DDP never waits
for their gradients; the position matrix trains whole but its base rows' gradients are zeroed, and
it sits in an optimizer group without weight decay, so AdamW leaves those rows exactly unchanged.
"""

from __future__ import annotations

import torch
from torch import nn

from trainers.config import Trainable

TOP_LAYERS = 2


def freeze_for(model: nn.Module, trainable: Trainable, base_rows: torch.Tensor | None) -> None:
    """Turn off ``requires_grad`` on what ``trainable`` leaves frozen in ``model`` (an encoder, or a
    masked-LM model whose ``base_model`` is one); ``base_rows``: ``doctune_core.longformer.base_position_rows``
    of it, the position rows that stay as the base had them (the first rows where the conversion copied,
    every s-th where it interpolated). Refuses a model without new position rows for anything but ``all``."""
    if trainable == "all":
        return
    if base_rows is None:
        raise ValueError(
            f"trainable {trainable!r} trains the position rows a Longformer conversion added, and this model "
            "has none: convert it (backbone.longformer) or train all parameters (trainable: all)"
        )
    encoder = model.base_model
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    positions = encoder.embeddings.position_embeddings.weight
    positions.requires_grad_(True)
    positions.register_hook(lambda grad: grad.masked_fill(base_rows[:, None].to(grad.device), 0.0))
    if trainable == "positions+top":
        for layer in encoder.encoder.layer[-TOP_LAYERS:]:
            layer.requires_grad_(True)


def parameter_groups(module: nn.Module, trainable: Trainable, weight_decay: float) -> list[dict]:
    """AdamW's groups for ``module``'s trainable parameters (``module.model`` the encoder, or a
    masked-LM model around it): with ``all`` one group with ``weight_decay``; otherwise the position
    matrix in a group of its own without weight decay (its frozen rows must not decay)."""
    trained = [p for p in module.parameters() if p.requires_grad]
    if trainable == "all":
        return [{"params": trained, "weight_decay": weight_decay}]
    positions = module.model.base_model.embeddings.position_embeddings.weight
    rest = [p for p in trained if p is not positions]
    return [{"params": rest, "weight_decay": weight_decay}, {"params": [positions], "weight_decay": 0.0}]
