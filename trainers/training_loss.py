"""A trial's training loss: the recipe's contrastive term plus the optional MLM, Bregman and anchor terms.

    total = lambda_c * contrastive + mlm_weight * MLM + lambda_b * Bregman + anchor_weight * anchor

The contrastive term is the ``ContrastiveLoss`` that ``hp.loss`` names, or where it names none the
recipe's own (``Recipe.loss``: DECA's Eq. 4 for ``deca``, InfoNCE for the others).
``LossHeads`` holds the trainable parts of the loss (the contrastive loss's head, such as
SimSiam's predictor, and the Bregman sub-networks); they run inside the model's forward so DDP
synchronises their gradients.
Losses over gathered embeddings are multiplied by the world size before backward (see
``trainers.distributed.gather``); the logged values are the plain ones.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from trainers.config import Hyperparameters, own_settings
from trainers.distributed import gather, world_size
from trainers.losses import (
    CONTRASTIVE_LOSSES,
    AnchorSettings,
    BregmanHead,
    BregmanSettings,
    ContrastiveLoss,
    active_subnetworks,
    anchor_loss,
    bregman_loss,
)
from trainers.pairs import contrastive_loss_name


def contrastive_loss(hp: Hyperparameters) -> ContrastiveLoss:
    return CONTRASTIVE_LOSSES[contrastive_loss_name(hp)]()


class LossHeads(nn.Module):
    def __init__(self, hp: Hyperparameters, dim: int) -> None:
        super().__init__()
        self.predictor = contrastive_loss(hp).head(dim)
        k = own_settings(hp, BregmanSettings).bregman_k
        self.bregman = BregmanHead(dim, k) if k > 0 else None

    def forward(self, embeddings: torch.Tensor) -> dict[str, torch.Tensor]:
        out = {}
        if self.predictor is not None:
            out["predictions"] = self.predictor(embeddings)
        if self.bregman is not None:
            out["bregman_scores"] = self.bregman(embeddings)
        return out


def view_cosines(a: torch.Tensor, b: torch.Tensor) -> dict[str, float]:
    """How far apart a batch's views are: the mean cosine of each pair (``positive_cosine``) and of
    every view A with the other pairs' views B (``negative_cosine``, this rank's in-batch negatives).
    Their gap is what the contrastive term has to learn from: dropout views of whole documents start
    at about 0.95 against 0.26 (bench/RESULTS.md, "Views with a gradient")."""
    cosines = F.normalize(a.float(), dim=-1) @ F.normalize(b.float(), dim=-1).T
    n = cosines.shape[0]
    positive = cosines.diagonal().mean().item()
    negative = (cosines.sum() - cosines.diagonal().sum()).item() / max(n * (n - 1), 1)
    return {"positive_cosine": positive, "negative_cosine": negative}


def hard_negative_cosine(a: torch.Tensor, negatives: torch.Tensor) -> float:
    """The mean cosine of each view A with its own pair's hard negatives (``negatives``: (n * k, d),
    pair i's k in turn)."""
    own = F.normalize(negatives.float(), dim=-1).view(a.shape[0], -1, a.shape[1])
    return (own @ F.normalize(a.float(), dim=-1).unsqueeze(-1)).mean().item()


def training_loss(hp: Hyperparameters, outputs: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, float]]:
    """``outputs`` holds ``embeddings`` (n * (2 + k) + m, d: view A rows, view B rows, each pair's
    ``k = hp.hard_negatives`` hard negatives in turn, then the anchor term's m short texts), the
    heads' outputs, ``mlm_loss`` when MLM is on and ``anchor_targets`` (m, d) when the anchor term
    is. Returns the loss to backpropagate and the values to log (each term, ``loss`` = their weighted
    sum, ``active_subnetworks`` with the Bregman term, the views' cosines, ``view_cosines``, and with
    hard negatives theirs, ``hard_negative_cosine``)."""
    embeddings = outputs["embeddings"]
    targets = outputs.get("anchor_targets")
    anchored = 0 if targets is None else targets.shape[0]
    n = (embeddings.shape[0] - anchored) // (2 + hp.hard_negatives)
    scale = world_size()
    a, b, negatives = embeddings[:n], embeddings[n : 2 * n], embeddings[2 * n : embeddings.shape[0] - anchored]
    loss = contrastive_loss(hp)
    predictions = outputs["predictions"][: 2 * n] if "predictions" in outputs else None
    with_negatives = {"negatives": negatives} if hp.hard_negatives else {}
    contrastive, contrastive_scale = loss(own_settings(hp, loss.settings), a, b, predictions, **with_negatives)
    total = hp.contrastive_weight * contrastive * contrastive_scale
    terms = {"contrastive_loss": contrastive.item(), **view_cosines(a.detach(), b.detach())}
    if hp.hard_negatives:
        terms["hard_negative_cosine"] = hard_negative_cosine(a.detach(), negatives.detach())
    logged = hp.contrastive_weight * terms["contrastive_loss"]
    if "mlm_loss" in outputs:
        total = total + hp.mlm_weight * outputs["mlm_loss"]
        terms["mlm_loss"] = outputs["mlm_loss"].item()
        logged += hp.mlm_weight * terms["mlm_loss"]
    if "bregman_scores" in outputs:
        scores, own = outputs["bregman_scores"], own_settings(hp, BregmanSettings)
        gathered_a, gathered_b = gather(scores[:n]), gather(scores[n : 2 * n])
        bregman = bregman_loss(gathered_a, gathered_b, own.bregman_sigma, own.bregman_temperature)
        total = total + own.bregman_weight * bregman * scale
        terms["bregman_loss"] = bregman.item()
        terms["active_subnetworks"] = float(active_subnetworks(torch.cat([gathered_a, gathered_b]).detach()))
        logged += own.bregman_weight * terms["bregman_loss"]
    if targets is not None:  # a per-rank mean: DDP's average over ranks is the global one
        anchor = anchor_loss(embeddings[embeddings.shape[0] - anchored :], targets.to(embeddings.device))
        weight = own_settings(hp, AnchorSettings).anchor_weight
        total = total + weight * anchor
        terms["anchor_loss"] = anchor.item()
        logged += weight * terms["anchor_loss"]
    terms["loss"] = logged
    return total, terms
