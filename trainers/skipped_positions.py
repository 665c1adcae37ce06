"""Short training inputs read at the positions of long texts: PoSE's skipped position ids (Zhu et al. 2023,
"PoSE: Efficient Context Window Extension of LLMs via Positional Skip-wise Training", arXiv 2309.10400,
Sec. 3.2), for a converted Longformer whose new position rows must learn from inputs of the base's length.

A row of ``n`` real tokens is read as a part of a text of ``N`` tokens, ``N`` drawn uniformly from
``[n, longest]``: its tokens are cut in two at ``c``, drawn uniformly from ``[1, n)`` (``[CLS]`` always
in the first part, at the first position), and the second part is moved ahead by ``u``, drawn uniformly
from ``[0, N - n]`` (PoSE's two chunks and skipping bias). Token ``t`` then takes position
``p = t`` (``t < c``) or ``p = t + u`` (``t >= c``) of the long text, and reads the row that text reads
for it (``doctune_core.position_interpolation.position_ids``): ``offset + floor(p * min(s, L / N))``, where
``L`` is the table's positions after ``offset`` and ``s`` its stretch (1 where the conversion copied
the base's rows block by block; ``L / P`` where it interpolated them). An input read so reaches rows no
input of at most ``P`` tokens reads; the base's own rows (``doctune_core.longformer.base_position_rows``)
stay as read before, so with ``trainable: positions`` every text of at most ``P`` tokens embeds exactly as
the untrained model embeds it.
"""

from __future__ import annotations

import torch


def skipped_position_ids(
    attention_mask: torch.Tensor, scale: int, offset: int, length: int, longest: int, generator: torch.Generator
) -> torch.Tensor:
    """(N, T) position ids for a padded batch's ``attention_mask`` (N, T), each row read as a part of a
    longer text of at most ``longest`` tokens (above); padding reads ``offset - 1``, the padding row.
    ``scale``: the table's stretch ``s`` (1: copied); ``offset``: the first position's row; ``length``:
    the positions after it (``longest`` is cut to it); ``generator``: the draws' (on the CPU)."""
    mask = attention_mask.long().cpu()
    token = (mask.cumsum(1) - 1).clamp(min=0)
    real = mask.sum(1, keepdim=True).clamp(min=1)
    draws = torch.rand((mask.shape[0], 3), generator=generator, dtype=torch.float64)
    longest = torch.clamp(torch.full_like(real, min(longest, length)), min=real)
    simulated = real + torch.floor(draws[:, :1] * (longest - real + 1)).long()  # N in [n, longest]
    cut = 1 + torch.floor(draws[:, 1:2] * (real - 1)).long()  # c in [1, n - 1]; 1 for a row of one token
    skip = torch.floor(draws[:, 2:] * (simulated - real + 1)).long()  # u in [0, N - n]
    where = token + torch.where(token >= cut, skip, torch.zeros_like(skip))
    stride = torch.minimum(torch.full_like(simulated, scale, dtype=torch.float64), length / simulated)
    ids = offset + torch.floor(where * stride).long()
    return torch.where(mask.bool(), ids, torch.full_like(ids, offset - 1)).to(attention_mask.device)


def plain_position_ids(attention_mask: torch.Tensor, scale: int, offset: int, length: int) -> torch.Tensor:
    """The ids rows read without skipping, as ``doctune_core.encoder.encode`` gives them (the anchor term's
    texts beside skipped views: they must read as the start read them)."""
    from doctune_core.position_interpolation import position_ids

    return position_ids(attention_mask, scale, offset, length)


def batch_position_ids(config, attention_mask: torch.Tensor, views: int, longest: int, seed: int) -> torch.Tensor:
    """A training batch's position ids for a converted Longformer of ``config``: its first ``views`` rows
    skipped (``skipped_position_ids``, drawn from ``seed``), the rest (the anchor term's texts) as read."""
    from doctune_core.position_interpolation import CONFIG_KEY

    scale = getattr(config, CONFIG_KEY, None) or 1
    offset = config.pad_token_id + 1
    length = config.max_position_embeddings - offset
    generator = torch.Generator().manual_seed(seed)
    skipped = skipped_position_ids(attention_mask[:views], scale, offset, length, longest, generator)
    return torch.cat([skipped, plain_position_ids(attention_mask[views:], scale, offset, length)])
