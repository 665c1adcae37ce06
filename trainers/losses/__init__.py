"""Loss terms, one per module, each documented with its inputs, shapes, formula and paper."""

from __future__ import annotations

from trainers.losses.info_nce import info_nce
from trainers.losses.mlm import mask_tokens

__all__ = ["info_nce", "mask_tokens"]
