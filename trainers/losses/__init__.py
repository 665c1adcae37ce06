"""Loss terms, one per module, each documented with its inputs, shapes, formula and paper.

The contrastive losses a spec's ``hyperparameters.loss`` names are ``ContrastiveLoss`` classes
registered by name in their modules (``CONTRASTIVE_LOSSES``); adding one is one module here
(docs/plugins.md). ``trainers.training_loss`` combines the
chosen one with the MLM, Bregman and anchor terms into a trial's training loss.
"""

from __future__ import annotations

from doctune_core.registry import import_plugins
from trainers.losses.base import CONTRASTIVE_LOSSES, ContrastiveLoss, TemperatureSettings

import_plugins(__name__, __path__, "doctune.losses")

from trainers.losses.anchor import AnchorSettings, anchor_loss  # noqa: E402
from trainers.losses.bregman import (  # noqa: E402
    BregmanHead,
    BregmanSettings,
    active_subnetworks,
    bregman_divergence,
    bregman_loss,
)
from trainers.losses.deca_nt_xent import deca_nt_xent  # noqa: E402
from trainers.losses.info_nce import info_nce  # noqa: E402
from trainers.losses.mlm import mask_tokens, masked_lm_loss, prediction_head  # noqa: E402
from trainers.losses.nt_xent import nt_xent  # noqa: E402
from trainers.losses.simsiam import SimSiamPredictor, simsiam_loss  # noqa: E402

__all__ = [
    "CONTRASTIVE_LOSSES",
    "AnchorSettings",
    "BregmanHead",
    "BregmanSettings",
    "ContrastiveLoss",
    "SimSiamPredictor",
    "TemperatureSettings",
    "active_subnetworks",
    "anchor_loss",
    "bregman_divergence",
    "bregman_loss",
    "deca_nt_xent",
    "info_nce",
    "mask_tokens",
    "masked_lm_loss",
    "nt_xent",
    "prediction_head",
    "simsiam_loss",
]
