"""Interpolated position embeddings for a Longformer made from a shorter encoder, read so that a text
the base could read is embedded exactly as the base embedded it.

LongEmbed's position interpolation (Zhu et al. 2024, arXiv 2404.12096, Sec. 4.2, Fig. 4) stretches
an absolute-position encoder's P learned rows over L = s * P positions: row ``s * i`` of the new
table is the base's row ``i`` and the rows between blend their two neighbours linearly (the last
``s - 1`` rows repeat the last learned one). Read with the usual position ids ``0, 1, 2, ...``, a
short text would then read the base's positions squeezed ``s``-fold and embed differently from the
base. Here a text of ``n`` real tokens reads row ``floor(t * stride)`` for its token ``t``, with
``stride = min(s, L / n)``: a text of at most P tokens reads the base's own rows ``0, s, 2s, ...``
(exactly what the base read), a longer one spreads over the whole table at a finer stride, so every
length reads the positions as one continuous function of where in the text a token sits.

Only torch is imported: the file is copied beside an exported model (``platform.export``), whose
sentence-transformers module computes the same position ids.
"""

from __future__ import annotations

import torch

CONFIG_KEY = "position_interpolation"  # in a model's config: s, the stretch of its position table


def interpolated_rows(base_rows: torch.Tensor, length: int) -> torch.Tensor:
    """(length, d) rows from the base's (P, d): row ``s * i`` is base row ``i`` and the rows between
    blend their neighbours linearly, ``s = length / P`` (a whole number)."""
    count = base_rows.shape[0]
    scale = stretch(count, length)
    where = torch.arange(length, dtype=torch.float64) / scale
    below = where.floor().long().clamp(max=count - 1)
    above = (below + 1).clamp(max=count - 1)
    weight = (where - below).clamp(max=1.0).to(base_rows.dtype)[:, None]
    return base_rows[below] * (1 - weight) + base_rows[above] * weight


def stretch(base_positions: int, length: int) -> int:
    """s: how many of the new table's rows each base position spans; ``length`` must be a multiple of
    ``base_positions`` so that the base's rows land on whole rows."""
    if length % base_positions or length < base_positions:
        raise ValueError(
            f"interpolated positions need a length that is a multiple of the base's {base_positions} positions; "
            f"got {length} (backbone.longformer.max_length)"
        )
    return length // base_positions


def position_ids(attention_mask: torch.Tensor, scale: int, offset: int, length: int) -> torch.Tensor:
    """(N, T) position ids for a padded batch's ``attention_mask`` (N, T): token ``t`` of a text with
    ``n`` real tokens reads row ``offset + floor(t * min(scale, length / n))``; padding reads
    ``offset - 1`` (the padding row, as the Longformer numbers it). ``offset``: the first position's
    row (pad + 1 in a Longformer), ``length``: the positions after it."""
    mask = attention_mask.long()
    token = (mask.cumsum(1) - 1).clamp(min=0).double()  # t, whichever side the batch is padded on
    real = mask.sum(1, keepdim=True).clamp(min=1).double()
    stride = torch.minimum(torch.full_like(real, float(scale)), length / real)
    ids = offset + torch.floor(token * stride).long()
    return torch.where(mask.bool(), ids, torch.full_like(ids, offset - 1))
