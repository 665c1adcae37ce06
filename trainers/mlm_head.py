"""A trained masked-LM head for a base encoder that ships without one, so that the auxiliary MLM
term (SimDE / DocSplit assume BERT's trained head) never reaches the encoder through random weights.

``ensure_mlm_head(model_dir, corpus_path, settings, ...)`` returns a model directory holding the
base's encoder, unchanged, and a masked-LM head trained for it on the search's corpus with the
encoder frozen. Trials load it as their base (``doctune_core.encoder.load_encoder``), and a Longformer
converted from it keeps the head (``doctune_core.longformer``).

Training. The corpus's first documents are packed into sequences of ``max_length`` tokens
(``trainers.base_stage.pack_blocks``) and masked with BERT's rule (``trainers.losses.mask_tokens``);
the frozen encoder runs once over them, without dropout, and the head's transform (dense layer and
LayerNorm) is fitted to the token states at the masked positions (AdamW, linear warm-up and decay,
``epochs`` passes). The head starts as the unigram predictor: its output bias holds the unigram
log-probabilities below, and stays so (counted on every training token, it is better estimated
than from the masked ones; trained on those it overfit rare tokens), and its LayerNorm scale
starts at zero, so its first prediction is the baseline's and whatever it gains comes from the
encoder's states. Its dense layer starts as the identity: the first thing it learns is how far
each coordinate of the normalised state, compared with each token's word embedding (the tied
decoder), says which token was masked, which needs less text than a random start.

Measure. The unigram baseline is the add-alpha smoothed token distribution of the training
sequences, alpha chosen by leave-one-out likelihood on those counts. Both it and the head are
scored (mean cross-entropy) on the masked positions of ``held_out`` sequences packed from the
documents after the training ones. A head whose held-out loss is not below the baseline's is
refused (``MlmHeadUnavailable``): its term would push the encoder towards token frequencies.

Cache layout under ``<cache>/mlm_heads/``, keyed by (base weights, corpus content, settings,
length, seed)::

    <key>/            config.json, model.safetensors (encoder and head), tokenizer files,
                      doctune-mlm-head.json (the settings, both held-out losses, the time taken)
    <key>.partial/    work in progress
    <key>.lock        held by the process that trains the head

A directory named ``<key>`` only ever appears by a rename, so it is always complete; two searches
asking for the same head at once train it once. A refused head stays cached with its record: the
same settings are refused again at once.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from doctune_core.data.atomic import exclusive_lock
from doctune_core.data.corpus import PreparedCorpus
from doctune_core.data.wheels import cache_dir
from doctune_core.encoder import ModelUnavailable, encode, load_encoder, weights_digest
from doctune_core.logs import progress
from trainers.base_stage import pack_blocks
from trainers.config import MlmHeadSettings
from trainers.losses import mask_tokens, prediction_head
from trainers.schedule import lr_factor

log = logging.getLogger(f"doctune.{__name__}")

FORMAT_VERSION = 1  # bump when what is trained changes for the same key
RECORD = "doctune-mlm-head.json"
POSITIONS_PER_STEP = 64  # masked positions per optimizer step
SEQUENCES_PER_FORWARD = 32
WARMUP_RATIO = 0.1  # the trials' default
PACK_CHUNK = 16  # documents tokenised at once: packing reads few more documents than the sequences need
SMOOTHING = tuple(10.0 ** (k / 2) for k in range(-6, 1))  # add-alpha candidates, 0.001 ... 1 (Laplace)


class MlmHeadUnavailable(ModelUnavailable):
    """No head good enough for an MLM term can be had; the message says why and what to change."""


@dataclass(frozen=True)
class MlmHead:
    path: Path  # the model directory: the base's encoder and the trained head
    held_out_loss: float  # the head's mean cross-entropy on the held-out masked positions
    unigram_loss: float  # the unigram baseline's, on the same positions
    seconds: float  # what training it took (recorded with it)
    trained: bool  # False when the cache held it

    @property
    def better_than_unigram(self) -> bool:
        return self.held_out_loss < self.unigram_loss


def mlm_head_entry(
    model_dir: str,
    corpus_path: str | Path,
    settings: MlmHeadSettings,
    max_length: int,
    seed: int,
    cache: Path | None = None,
) -> Path:
    """Where the head for this base, corpus and settings lives (whether or not it exists yet)."""
    ident = {
        "format": FORMAT_VERSION,
        "base": weights_digest(model_dir),
        "corpus": PreparedCorpus.load(corpus_path).digest,
        "settings": dataclasses.asdict(settings),
        "max_length": max_length,
        "seed": seed,
    }
    key = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:20]
    return (cache or cache_dir()) / "mlm_heads" / key


def ensure_mlm_head(
    model_dir: str,
    corpus_path: str | Path,
    settings: MlmHeadSettings,
    *,
    max_length: int,
    seed: int,
    base_name: str,
    corpus_name: str,
    cache: Path | None = None,
) -> MlmHead:
    """The base with its trained head, trained now unless the cache holds it; raises
    ``MlmHeadUnavailable`` when the head is no better than the unigram baseline."""
    entry = mlm_head_entry(model_dir, corpus_path, settings, max_length, seed, cache)
    trained = False
    if not entry.is_dir():  # a complete entry only ever appears by a rename: reading one needs no lock
        with exclusive_lock(entry):
            if not entry.is_dir():  # nobody finished it while we waited
                log.info(
                    f"doctune: MLM head for {base_name} (it ships none): training one, the encoder frozen, on "
                    f"{settings.sequences} sequences of {max_length} tokens of {corpus_name!r} into {entry}"
                )
                work = entry.with_name(entry.name + ".partial")
                shutil.rmtree(work, ignore_errors=True)
                corpus = PreparedCorpus.load(corpus_path)
                documents = (" ".join(sentences) for sentences in corpus.documents())
                record = {"base": base_name, "corpus": corpus_name, "corpus_sha256": corpus.digest}
                train_mlm_head(model_dir, documents, settings, max_length, seed, work, record)
                os.replace(work, entry)
                trained = True
    head = read_mlm_head(entry, trained)
    how = f"trained in {head.seconds:.1f} s:" if trained else "reusing"
    verdict = "below" if head.better_than_unigram else "not below"
    log.info(
        f"doctune: MLM head for {base_name}: {how} {entry}; held-out MLM loss {head.held_out_loss:.3f}, {verdict} "
        f"the unigram baseline's {head.unigram_loss:.3f}"
    )
    if not head.better_than_unigram:
        raise MlmHeadUnavailable(
            f"the masked-LM head trained for {base_name} on {corpus_name!r} is no better than predicting the corpus's "
            f"unigram token distribution (held-out MLM loss {head.held_out_loss:.3f} against {head.unigram_loss:.3f}), "
            "so an MLM term would train the encoder through a head that reads nothing from it; set mlm_weight to 0 "
            "(hyperparameters.mlm_weight, and no value above 0 in search.space.mlm_weight), use a base_model with a "
            "trained masked-LM head, or train the head on more text (mlm_head.sequences, mlm_head.epochs)"
        )
    return head


def read_mlm_head(entry: Path, trained: bool = False) -> MlmHead:
    record = json.loads((entry / RECORD).read_text())
    return MlmHead(entry, record["held_out_loss"], record["unigram_loss"], record["seconds"], trained)


def train_mlm_head(
    model_dir: str,
    documents: Iterator[str],
    settings: MlmHeadSettings,
    max_length: int,
    seed: int,
    target: Path,
    record: dict | None = None,
) -> dict:
    """Train the head of ``model_dir``'s encoder on ``documents`` and save the model into ``target``
    (see the module docstring); returns the record written beside it."""
    began = time.perf_counter()
    model, tokenizer = load_encoder(model_dir, with_mlm_head=True, new_head=True)
    model.eval()  # the frozen encoder's states without dropout; the head has none
    head = _head(model)
    train_blocks = pack_blocks(tokenizer, documents, max_length, PACK_CHUNK, max_blocks=settings.sequences)
    held_out_blocks = pack_blocks(tokenizer, documents, max_length, PACK_CHUNK, max_blocks=settings.held_out)
    if len(train_blocks) < settings.sequences or len(held_out_blocks) < settings.held_out:
        raise MlmHeadUnavailable(
            f"the corpus holds too little text for the masked-LM head: about {len(train_blocks) + len(held_out_blocks)}"
            f" sequences of {max_length} tokens where it trains on {settings.sequences} and measures on "
            f"{settings.held_out} more; lower mlm_head.sequences and mlm_head.held_out, or set mlm_weight to 0"
        )
    train_ids, special = _ids(train_blocks, tokenizer)
    vocabulary = model.get_output_embeddings().out_features
    log_probs, alpha = unigram_log_probs(torch.bincount(train_ids[~special], minlength=vocabulary))
    states, labels = _masked_states(model, tokenizer, train_ids, special, seed)
    held_states, held_labels = _masked_states(model, tokenizer, *_ids(held_out_blocks, tokenizer), seed + 1)
    with torch.no_grad():  # start as the unigram predictor, with an identity transform (module docstring)
        model.get_output_embeddings().bias.copy_(log_probs)
        for module in head.modules():
            if isinstance(module, nn.LayerNorm):
                module.weight.zero_()
            elif isinstance(module, nn.Linear) and module.in_features == module.out_features:
                module.weight.copy_(torch.eye(module.in_features))
                module.bias.zero_()
    unigram_loss = float(-log_probs[held_labels].mean())
    _fit(model, head, states, labels, settings, seed)
    held_out_loss = _mean_cross_entropy(head, held_states, held_labels)
    record = {
        **(record or {}),
        "kind": "mlm-head",
        "base_weights": weights_digest(model_dir),
        "settings": dataclasses.asdict(settings),
        "max_length": max_length,
        "seed": seed,
        "training_positions": len(labels),
        "held_out_positions": len(held_labels),
        "unigram_smoothing_alpha": alpha,
        "unigram_loss": unigram_loss,
        "held_out_loss": held_out_loss,
        "seconds": round(time.perf_counter() - began, 2),
        "torch_threads": torch.get_num_threads(),
    }
    target.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(target, safe_serialization=True)
    tokenizer.save_pretrained(target)
    (target / RECORD).write_text(json.dumps(record, indent=2, sort_keys=True))
    return record


def unigram_log_probs(counts: torch.Tensor) -> tuple[torch.Tensor, float]:
    """Add-alpha smoothed log-probabilities of a token-count vector, with alpha the candidate whose
    leave-one-out likelihood of the counts is highest (no held-out text is read), and that alpha."""
    counts = counts.double()
    total, vocabulary = float(counts.sum()), len(counts)
    seen = counts[counts > 0]

    def leave_one_out(alpha: float) -> float:
        return float((seen * torch.log((seen - 1 + alpha) / (total - 1 + alpha * vocabulary))).sum())

    alpha = max(SMOOTHING, key=leave_one_out)
    return torch.log((counts + alpha) / (total + alpha * vocabulary)).float(), alpha


def _head(model: nn.Module) -> nn.Module:
    """The masked-LM model's head: its one module beside the encoder (BERT's ``cls``, RoBERTa's and
    Longformer's ``lm_head``)."""
    head = prediction_head(model)
    if head is None:
        raise MlmHeadUnavailable(
            f"{type(model).__name__}'s masked-LM head is not one module beside its encoder, which is what doctune "
            "trains (BERT-, RoBERTa- and Longformer-style models); use a base_model with a trained masked-LM head "
            "or set mlm_weight to 0"
        )
    return head


def _ids(blocks: np.ndarray, tokenizer) -> tuple[torch.Tensor, torch.Tensor]:
    """Packed blocks as token ids, and where special tokens and padding are (never masked, never counted)."""
    ids = torch.from_numpy(blocks.astype(np.int64))
    return ids, torch.isin(ids, torch.tensor(tokenizer.all_special_ids))


@torch.no_grad()
def _masked_states(
    model: nn.Module, tokenizer, ids: torch.Tensor, special: torch.Tensor, seed: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The frozen encoder's token states at the positions BERT's rule masks, and their labels."""
    masked, labels = mask_tokens(
        ids, special, tokenizer.mask_token_id, len(tokenizer), torch.Generator().manual_seed(seed)
    )
    attention = (ids != tokenizer.pad_token_id).long()
    states, targets = [], []
    batches = torch.arange(len(ids)).split(SEQUENCES_PER_FORWARD)
    for rows in progress(batches, len(batches), "MLM head: encoding the corpus", unit="batch"):
        hidden = encode(model.base_model, masked[rows], attention[rows])
        picked = labels[rows] != -100
        states.append(hidden[picked])
        targets.append(labels[rows][picked])
    return torch.cat(states), torch.cat(targets)


def _fit(
    model: nn.Module, head: nn.Module, states: torch.Tensor, labels: torch.Tensor, settings: MlmHeadSettings, seed: int
) -> None:
    """AdamW on the head's transform: the decoder weight is the encoder's word embeddings, and the
    output bias stays the unigram log-probabilities."""
    model.requires_grad_(False)
    frozen = {id(p) for p in model.base_model.parameters()} | {id(model.get_output_embeddings().bias)}
    parameters = [p for p in head.parameters() if id(p) not in frozen]
    for parameter in parameters:
        parameter.requires_grad_(True)
    optimizer = torch.optim.AdamW(parameters, lr=settings.lr)
    steps_per_epoch = math.ceil(len(labels) / POSITIONS_PER_STEP)
    total = settings.epochs * steps_per_epoch
    head.train()
    for epoch in range(settings.epochs):
        order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(seed * 1000 + epoch))
        for index, rows in enumerate(order.split(POSITIONS_PER_STEP)):
            for group in optimizer.param_groups:
                group["lr"] = settings.lr * lr_factor(epoch * steps_per_epoch + index, total, WARMUP_RATIO)
            optimizer.zero_grad(set_to_none=True)
            F.cross_entropy(head(states[rows]), labels[rows]).backward()
            optimizer.step()
    head.eval()


@torch.no_grad()
def _mean_cross_entropy(head: nn.Module, states: torch.Tensor, labels: torch.Tensor) -> float:
    total = sum(
        float(F.cross_entropy(head(states[rows]), labels[rows], reduction="sum"))
        for rows in torch.arange(len(labels)).split(1024)
    )
    return total / len(labels)
