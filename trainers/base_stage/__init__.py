"""The base stage: a vanilla (MLM-only) BERT and its WordPiece vocabulary, trained from scratch on
a search's corpus and cached by (corpus content, settings), for searches whose base must not be
contrastively trained already (see ``trainers.base_stage.stage``)."""

from __future__ import annotations

from trainers.base_stage.stage import (
    BaseResult,
    BaseStageFailed,
    base_digest,
    base_entry,
    ensure_base,
    pack_blocks,
    train_tokenizer,
)

__all__ = [
    "BaseResult",
    "BaseStageFailed",
    "base_digest",
    "base_entry",
    "ensure_base",
    "pack_blocks",
    "train_tokenizer",
]
