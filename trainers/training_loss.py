"""A trial's training loss: the recipe's contrastive term plus the optional MLM and Bregman terms.

    total = lambda_c * contrastive + mlm_weight * MLM + lambda_b * Bregman

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
    BregmanHead,
    BregmanSettings,
    ContrastiveLoss,
    active_subnetworks,
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


def training_loss(hp: Hyperparameters, outputs: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, float]]:
    """``outputs`` holds ``embeddings`` (2n, d: view A rows then view B rows), the heads' outputs,
    and ``mlm_loss`` when MLM is on. Returns the loss to backpropagate and the values to log
    (each term, ``loss`` = their weighted sum, ``active_subnetworks`` with the Bregman term, and the
    views' cosines, ``view_cosines``)."""
    embeddings = outputs["embeddings"]
    n = embeddings.shape[0] // 2
    scale = world_size()
    a, b = embeddings[:n], embeddings[n:]
    loss = contrastive_loss(hp)
    contrastive, contrastive_scale = loss(own_settings(hp, loss.settings), a, b, outputs.get("predictions"))
    total = hp.contrastive_weight * contrastive * contrastive_scale
    terms = {"contrastive_loss": contrastive.item(), **view_cosines(a.detach(), b.detach())}
    logged = hp.contrastive_weight * terms["contrastive_loss"]
    if "mlm_loss" in outputs:
        total = total + hp.mlm_weight * outputs["mlm_loss"]
        terms["mlm_loss"] = outputs["mlm_loss"].item()
        logged += hp.mlm_weight * terms["mlm_loss"]
    if "bregman_scores" in outputs:
        scores, own = outputs["bregman_scores"], own_settings(hp, BregmanSettings)
        gathered_a, gathered_b = gather(scores[:n]), gather(scores[n:])
        bregman = bregman_loss(gathered_a, gathered_b, own.bregman_sigma, own.bregman_temperature)
        total = total + own.bregman_weight * bregman * scale
        terms["bregman_loss"] = bregman.item()
        terms["active_subnetworks"] = float(active_subnetworks(torch.cat([gathered_a, gathered_b]).detach()))
        logged += own.bregman_weight * terms["bregman_loss"]
    terms["loss"] = logged
    return total, terms
