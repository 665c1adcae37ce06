"""Longformer self-attention (sliding window + global tokens) on PyTorch's fused attention.

The attention of Beltagy et al. 2020 (Sec. 3.1), as Hugging Face's ``LongformerSelfAttention``
computes it. With one-sided window w (``attention_window / 2``), sequence length L (a multiple of
``attention_window``: ``LongformerModel`` pads to it), heads of size d, and G the set of global
positions of a row:

- a position i that is not global attends, with the ``query``/``key``/``value`` projections, to
  the positions j with |i - j| <= w that are neither padding nor global, and to every global
  position (each counted once):  out_i = sum_j softmax_j(q_i . k_j / sqrt(d)) v_j;
- a global position attends to every non-padding position with the ``*_global`` projections;
- a padding position's output is zero. Dropout applies to the attention probabilities.

Hugging Face computes the band by reshaping the sequence into overlapping chunks of 2w, many
small matmuls and copies, and scores 4w keys per query to keep 2w + 1. Here the queries go in
blocks of b (b divides w); block n, queries [nb, nb + b), takes the keys [nb - w, nb + b + w)
plus the global keys, with an additive mask (0 or -inf) for the band, padding and de-duplicated
global keys:

    q: (B, L/b, H, b, d)   keys, values: (B, L/b, H, b + 2w + |G|, d)   mask: (B, L/b, 1, b, b + 2w + |G|)

and one ``scaled_dot_product_attention`` over all blocks: a fused kernel that takes an additive
mask (memory-efficient attention on a GPU, the flash-style CPU kernel in evaluation). On the CPU
that kernel has no dropout, and a training step with dropout goes through
``_WindowAttentionWithDropout`` instead: the same math in six large batched matmuls and a few
elementwise passes, keeping for backward the probabilities and the kept probabilities only (the
key and value blocks are rebuilt). Blocks of b = 64 queries score b + 2w keys per query (320 at
w = 128, against 2w + 1 = 257 needed), fewer than blocks of w (3w), at the price of copying the
keys and values (b + 2w) / b times into their blocks: a trade between scored and copied entries.
Global rows are a (G x L) attention; for a few global tokens it is reassociated,
q . (W h + c) = (q W) . h + q . c, so the global key and value projections of all L positions
are not computed at all.

FlexAttention (``torch.nn.attention.flex_attention``) was the other candidate; in torch 2.13 it
has no backward on the CPU ("FlexAttention does not support backward on CPU"), so it cannot train
here. bench/longformer_attention.py measures this module against Hugging Face's (bench/RESULTS.md).

``use_fused_attention(model)`` swaps the class of every ``LongformerSelfAttention`` in a loaded
model; parameters and their names are unchanged, so ``save_pretrained`` writes a plain Longformer
that ``AutoModel`` loads with Hugging Face's attention.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from transformers.models.longformer.modeling_longformer import LongformerSelfAttention

QUERY_BLOCK = 64  # b = gcd(w, 64), queries per block: 64, or a smaller power of two dividing w


def _query_block(window: int) -> int:
    return math.gcd(window, QUERY_BLOCK)


def _window_blocks(x: torch.Tensor, window: int, block: int, extra: torch.Tensor) -> torch.Tensor:
    """(B, L, H, d) -> (B, L/b, H, b + 2w + G, d): for each block of b queries the keys (or values)
    from w before its first query to w after its last, zeros past either end, then ``extra``
    (B, H, G, d), the global keys, appended to every block."""
    batch, _, heads, dim = x.shape
    local = F.pad(x, (0, 0, 0, 0, window, window)).unfold(1, block + 2 * window, block).transpose(-1, -2)
    blocks = local.shape[1]
    return torch.cat([local, extra[:, None].expand(batch, blocks, heads, -1, dim)], 3)


def _fold_window_blocks(grad: torch.Tensor, window: int, length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The adjoint of ``_window_blocks``: the gradient of its (B, L/b, H, b + 2w + G, d) output back
    to x (B, L, H, d) and to ``extra`` (B, H, G, d)."""
    batch, blocks, heads, _, dim = grad.shape
    block = length // blocks
    span = block + 2 * window
    padded = grad.new_zeros(batch, length + 2 * window, heads, dim)
    for start in range(0, span, block):  # each block's keys are (b + 2w) / b whole blocks of the padded sequence
        target = padded[:, start : start + length].view(batch, blocks, block, heads, dim)
        target.add_(grad[:, :, :, start : start + block].transpose(2, 3))
    return padded[:, window : window + length], grad[:, :, :, span:].sum(1)


class _WindowAttentionWithDropout(torch.autograd.Function):
    """softmax(q k^T + mask) with dropout on the probabilities, then @ v, over window blocks (CPU
    training), in few passes over the (B, L/b, H, b, K) probabilities. Backward keeps the
    probabilities P and the kept ones P' (P where dropout keeps, else 0) and takes the gradient
    of the scores as

        dS = P' * (dO V^T) / (1 - p) - P * rowsum(dO * O)

    (softmax's gradient through dropout, whose row sum comes from the small output O instead of
    another pass over the probabilities). The scores and the key and value blocks are not kept."""

    @staticmethod
    def forward(ctx, query, key, value, key_global, value_global, mask, dropout: float, window: int):
        # query (B, L/b, H, b, d), scaled; key, value (B, L, H, d); *_global (B, H, G, d); mask (B, L/b, 1, b, K)
        block = query.shape[3]
        keys = _window_blocks(key, window, block, key_global)
        probs = torch.softmax(torch.matmul(query, keys.transpose(-1, -2)).add_(mask), -1)
        del keys
        kept = torch.where(torch.empty_like(probs, dtype=torch.bool).bernoulli_(1 - dropout), probs, 0.0)
        values = _window_blocks(value, window, block, value_global)
        out = torch.matmul(kept, values).mul_(1 / (1 - dropout))
        ctx.save_for_backward(query, key, value, key_global, value_global, probs, kept, out)
        ctx.dropout, ctx.window = dropout, window
        return out

    @staticmethod
    def backward(ctx, grad_out):
        query, key, value, key_global, value_global, probs, kept, out = ctx.saved_tensors
        window, length, block = ctx.window, key.shape[1], query.shape[3]
        scaled = grad_out * (1 / (1 - ctx.dropout))
        grad_values = torch.matmul(kept.transpose(-1, -2), scaled)
        values = _window_blocks(value, window, block, value_global)
        grad_scores = torch.matmul(scaled, values.transpose(-1, -2)).mul_(kept)
        del values
        grad_scores.addcmul_(probs, (grad_out * out).sum(-1, keepdim=True), value=-1.0)
        keys = _window_blocks(key, window, block, key_global)
        grad_query = torch.matmul(grad_scores, keys)
        del keys
        grad_keys = torch.matmul(grad_scores.transpose(-1, -2), query)
        grad_key, grad_key_global = _fold_window_blocks(grad_keys, window, length)
        grad_value, grad_value_global = _fold_window_blocks(grad_values, window, length)
        return grad_query, grad_key, grad_value, grad_key_global, grad_value_global, None, None, None


class FusedLongformerSelfAttention(LongformerSelfAttention):
    """``LongformerSelfAttention`` with the same parameters, inputs and outputs, computed over
    window blocks with fused attention (module docstring). With ``output_attentions`` it is
    Hugging Face's computation, whose returned probabilities have that implementation's layout."""

    def forward(
        self,
        hidden_states,
        attention_mask=None,
        is_index_masked=None,
        is_index_global_attn=None,
        is_global_attn=None,
        output_attentions=False,
    ):
        if output_attentions:
            return super().forward(
                hidden_states, attention_mask, is_index_masked, is_index_global_attn, is_global_attn, output_attentions
            )
        batch, length, embed = hidden_states.shape
        heads, dim, window = self.num_heads, self.head_dim, self.one_sided_attn_window_size
        block = _query_block(window)
        blocks = length // block
        dropout = self.dropout if self.training else 0.0
        device = hidden_states.device

        query = self.query(hidden_states).div_(math.sqrt(dim)).view(batch, blocks, block, heads, dim).transpose(2, 3)
        key = self.key(hidden_states).view(batch, length, heads, dim)
        value = self.value(hidden_states).view(batch, length, heads, dim)
        # attention_mask is negative at padding, 0 at local and positive at global positions
        local_key = F.pad(attention_mask == 0, (window, window), value=False).unfold(1, block + 2 * window, block)
        offset = torch.arange(block + 2 * window, device=device) - torch.arange(block, device=device)[:, None] - window
        allowed = (offset.abs() <= window) & local_key[:, :, None, :]  # (B, L/b, b, b + 2w)
        if is_global_attn:
            count = is_index_global_attn.sum(1)
            slots = int(count.max())
            # the global positions of each row in order, then (unused) other positions to fill its slots
            positions = torch.argsort((~is_index_global_attn).to(torch.int8), dim=1, stable=True)[:, :slots]
            filled = torch.arange(slots, device=device) < count[:, None]  # (B, G)
            allowed = torch.cat([allowed, filled[:, None, None, :].expand(batch, blocks, block, slots)], 3)
        else:
            positions = torch.zeros(batch, 0, dtype=torch.long, device=device)
        # a padding query's output is zeroed below; letting it see its whole block keeps its softmax finite
        allowed |= is_index_masked.view(batch, blocks, block, 1)
        mask = torch.zeros(allowed.shape, dtype=query.dtype, device=device).masked_fill_(~allowed, float("-inf"))
        mask = mask[:, :, None]
        index = positions[:, :, None, None].expand(-1, -1, heads, dim)
        key_global = key.gather(1, index).transpose(1, 2)  # (B, H, G, d)
        value_global = value.gather(1, index).transpose(1, 2)

        if dropout > 0 and device.type == "cpu":
            out = _WindowAttentionWithDropout.apply(query, key, value, key_global, value_global, mask, dropout, window)
        else:
            out = F.scaled_dot_product_attention(
                query.reshape(batch * blocks, heads, block, dim),
                _window_blocks(key, window, block, key_global).flatten(0, 1),
                _window_blocks(value, window, block, value_global).flatten(0, 1),
                attn_mask=mask.flatten(0, 1),
                dropout_p=dropout,
                scale=1.0,
            )
        out = out.reshape(batch, blocks, heads, block, dim).transpose(2, 3).reshape(batch, length, embed)
        out = out.masked_fill(is_index_masked[:, :, None], 0.0)
        if is_global_attn:
            rows, slot = filled.nonzero(as_tuple=True)
            global_out = self._global_rows(hidden_states, positions, is_index_masked, dropout)
            # under autocast the global rows may come out in another precision than the window's
            out = out.index_put((rows, positions[rows, slot]), global_out[rows, slot].to(out.dtype))
        return (out,)

    def _global_rows(
        self, hidden_states: torch.Tensor, positions: torch.Tensor, is_index_masked: torch.Tensor, dropout: float
    ) -> torch.Tensor:
        """(B, G, D): the outputs of the tokens at ``positions``, each attending to every
        non-padding position with the ``*_global`` projections."""
        batch, length, embed = hidden_states.shape
        heads, dim, slots = self.num_heads, self.head_dim, positions.shape[1]
        chosen = hidden_states.gather(1, positions[:, :, None].expand(-1, -1, embed))
        query = self.query_global(chosen).div_(math.sqrt(dim)).view(batch, slots, heads, dim).transpose(1, 2)
        padding = is_index_masked[:, None, None, :]
        if slots * (heads - 1) < embed:  # fewer multiply-adds than projecting all L positions
            # per head, q . (W h + c) = (q W) . h + q . c: the queries as weights on the hidden states
            query_weight = torch.einsum("bhgd,hde->bhge", query, self.key_global.weight.view(heads, dim, embed))
            query_bias = torch.einsum("bhgd,hd->bhg", query, self.key_global.bias.view(heads, dim))
            # (B, H * G, D) against (B, D, L): a broadcast over heads would copy the hidden states per head
            scores = torch.bmm(query_weight.flatten(1, 2), hidden_states.transpose(1, 2)).view(
                batch, heads, slots, length
            )
            scores = scores + query_bias[..., None]
            probs = F.dropout(torch.softmax(scores.masked_fill(padding, float("-inf")), -1), dropout, self.training)
            mixed = torch.bmm(probs.flatten(1, 2), hidden_states).view(batch, heads, slots, embed)  # sum_l p_l h_l
            value_weight = self.value_global.weight.view(heads, dim, embed)
            out = torch.einsum("bhge,hde->bhgd", mixed, value_weight)
            out = out + probs.sum(-1, keepdim=True) * self.value_global.bias.view(heads, 1, dim)  # sum_l p_l c
        else:
            key = self.key_global(hidden_states).view(batch, length, heads, dim).transpose(1, 2)
            value = self.value_global(hidden_states).view(batch, length, heads, dim).transpose(1, 2)
            out = F.scaled_dot_product_attention(query, key, value, attn_mask=~padding, dropout_p=dropout, scale=1.0)
        return out.transpose(1, 2).reshape(batch, slots, embed)


def use_fused_attention(model: nn.Module) -> int:
    """Compute every Longformer self-attention in ``model`` with ``FusedLongformerSelfAttention``,
    in place; returns how many modules were switched. The state dict is unchanged."""
    switched = 0
    for module in model.modules():
        if type(module) is LongformerSelfAttention:
            module.__class__ = FusedLongformerSelfAttention
            switched += 1
    return switched
