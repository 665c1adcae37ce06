"""Loss terms, one per module, each documented with its inputs, shapes, formula and paper.

``trainers.objective`` combines them into a trial's training loss.
"""

from __future__ import annotations

from trainers.losses.bregman import BregmanHead, active_subnetworks, bregman_divergence, bregman_loss
from trainers.losses.info_nce import info_nce
from trainers.losses.mlm import mask_tokens
from trainers.losses.nt_xent import nt_xent
from trainers.losses.simsiam import SimSiamPredictor, simsiam_loss

__all__ = [
    "BregmanHead",
    "SimSiamPredictor",
    "active_subnetworks",
    "bregman_divergence",
    "bregman_loss",
    "info_nce",
    "mask_tokens",
    "nt_xent",
    "simsiam_loss",
]
