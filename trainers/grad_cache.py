"""Cached contrastive loss (GradCache): large in-batch negatives with memory bounded by a chunk.

The contrastive loss couples every example of the batch, so the plain step must hold the
activations of the whole batch. GradCache splits the step in three:

1. embed the batch chunk by chunk without a graph (the random state before each chunk is kept);
2. compute the loss on those embeddings (a leaf tensor) over the *full* batch, gathered across
   ranks as usual, and backpropagate to get d loss / d embedding (the loss heads' gradients come
   here too);
3. re-run each chunk with a graph, restoring its random state so dropout draws the same masks,
   and backpropagate ``sum(embedding * cached_gradient)``.

The result is the gradient of the plain loss over the same forward passes, exactly (a test checks
it to float tolerance), with peak activation memory of one chunk. The MLM term is per-example and
is back-propagated chunk by chunk, weighted by each chunk's share of the masked tokens.

Gradient accumulation is not a substitute: it shrinks the set of in-batch negatives to the
micro-batch, which changes the contrastive objective itself.

Gao et al., "Scaling Deep Contrastive Learning Batch Size under Memory Limited Setup" (RepL4NLP
2021).
"""

from __future__ import annotations

from contextlib import nullcontext

import torch
import torch.distributed as dist

from doctune_core.encoder import by_length, trimmed
from trainers.config import Hyperparameters
from trainers.training_loss import training_loss


class RandomState:
    """The CPU (and current CUDA device's) generator state, to replay dropout exactly."""

    def __init__(self, device: torch.device) -> None:
        self.cpu = torch.get_rng_state()
        self.cuda = torch.cuda.get_rng_state(device) if device.type == "cuda" else None
        self.device = device

    def restore(self) -> None:
        torch.set_rng_state(self.cpu)
        if self.cuda is not None:
            torch.cuda.set_rng_state(self.cuda, self.device)


def _chunks(rows: int, size: int) -> list[slice]:
    return [slice(start, min(start + size, rows)) for start in range(0, rows, size)]


def cached_step(module, inputs: dict[str, torch.Tensor], hp: Hyperparameters, chunk_size: int, autocast=None):
    """Forward and backward of one training step; gradients end up in ``module``'s parameters.

    ``module`` is the bare ``ContrastiveModel`` (not DDP-wrapped: call ``all_reduce_gradients``
    afterwards). Returns ``(loss, terms)`` like ``training_loss``, with the MLM term included.
    """
    autocast = autocast or nullcontext()
    ids, mask, positions = inputs["input_ids"], inputs["attention_mask"], inputs.get("position_ids")
    device = ids.device
    # chunks of rows of similar length, each cut to its longest row: little padding is computed
    order, ends = by_length(mask)
    chunks = order.split(chunk_size)
    states, pieces = [], []
    with torch.no_grad():
        for rows in chunks:
            states.append(RandomState(device))
            with autocast:
                pieces.append(module.embed(*trimmed(ids, mask, rows, ends, positions)).float())
    embeddings = torch.cat(pieces)[torch.argsort(order)].requires_grad_()
    outputs = {"embeddings": embeddings}
    if "anchor_targets" in inputs:
        outputs["anchor_targets"] = inputs["anchor_targets"]
    if module.heads is not None:
        outputs |= module.heads(embeddings)
    loss, terms = training_loss(hp, outputs)
    loss.backward()
    cached = embeddings.grad
    for rows, state in zip(chunks, states):
        state.restore()
        with autocast:
            piece = module.embed(*trimmed(ids, mask, rows, ends, positions)).float()
        (piece * cached[rows]).sum().backward()
    if "mlm_labels" in inputs:
        mlm = _chunked_mlm(module, inputs, chunk_size, hp.mlm_weight, autocast)
        terms["mlm_loss"] = mlm
        terms["loss"] += hp.mlm_weight * mlm
        loss = loss.detach() + hp.mlm_weight * mlm
    return loss, terms


def _chunked_mlm(module, inputs, chunk_size: int, weight: float, autocast) -> float:
    labels = inputs["mlm_labels"]
    total_masked = max(1, int((labels != -100).sum()))
    value = 0.0
    for rows in _chunks(labels.shape[0], chunk_size):
        share = int((labels[rows] != -100).sum()) / total_masked
        if share == 0:
            continue
        with autocast:
            chunk_loss = module.mlm_loss(
                inputs["mlm_input_ids"][rows], inputs["mlm_attention_mask"][rows], labels[rows]
            )
        (weight * share * chunk_loss).backward()
        value += share * chunk_loss.item()
    return value


def all_reduce_gradients(module: torch.nn.Module) -> None:
    """Average gradients over ranks (what DDP does), in one flat buffer."""
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return
    params = [p for p in module.parameters() if p.requires_grad]
    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
    flat = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(flat)
    flat /= dist.get_world_size()
    offset = 0
    for p in params:
        n = p.numel()
        p.grad = flat[offset : offset + n].view_as(p).clone()
        offset += n
