"""A Longformer made from any BERT-like encoder, for long documents.

The recipe of the Longformer paper (Beltagy et al. 2020, Sec. 5) as the Bregman document paper
applies it to Legal-BERT / BioBERT: keep every weight, copy the learned position embeddings block
by block out to the new length, initialise the global-attention query/key/value projections from
the local ones, and set a sliding attention window. [CLS] gets global attention
(``doctune_core.encoder.encode`` passes ``global_attention_mask``).

With a window wide enough to cover a short input, the converted model computes exactly what the
original does (a test checks it); at 4096 tokens its attention costs grow linearly with length.
The result is an ordinary Longformer directory (config, safetensors, tokenizer) that ``AutoModel``
loads. A base that carries a masked-LM head (a BERT pretrained with MLM, doctune's vanilla base)
keeps it: the head is converted with the encoder (``LongformerForMaskedLM``, BERT's prediction
transform and bias under RoBERTa's names, the decoder tied to the word embeddings), so the
auxiliary MLM term of DocSplit / SimDE continues from it instead of from random weights.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import torch
from torch import nn

from doctune_core.position_interpolation import CONFIG_KEY, interpolated_rows, stretch

GLOBAL_PROJECTIONS = ("query", "key", "value")
CONVERSION_RECORD = "doctune-longformer.json"  # beside the converted weights: source, length, window, new rows
# a BERT masked-LM head's weights under a Longformer's names (RoBERTa-style bases already use them)
MLM_HEAD = {
    "cls.predictions.transform.dense.weight": "lm_head.dense.weight",
    "cls.predictions.transform.dense.bias": "lm_head.dense.bias",
    "cls.predictions.transform.LayerNorm.weight": "lm_head.layer_norm.weight",
    "cls.predictions.transform.LayerNorm.bias": "lm_head.layer_norm.bias",
    "cls.predictions.bias": "lm_head.bias",
}


def mlm_head_weights(model_dir: str) -> dict:
    """The masked-LM head of the checkpoint in ``model_dir`` under a Longformer's names (empty when it
    has none); the decoder weight is left out, being tied to the word embeddings."""
    from safetensors.torch import load_file

    head = {}
    for shard in sorted(Path(model_dir).glob("*.safetensors")):
        for key, value in load_file(str(shard)).items():
            roberta_style = key.startswith("lm_head.") and key != "lm_head.decoder.weight"
            name = MLM_HEAD.get(key) or (key if roberta_style else None)
            if name:
                head[name] = value
    if "lm_head.bias" in head:  # the decoder's bias is the head's bias (tied in BERT, a copy in some versions)
        head.setdefault("lm_head.decoder.bias", head["lm_head.bias"])
    return head


def convert_to_longformer(source_dir: str, target_dir: str, max_length: int, attention_window: int) -> Path:
    from transformers import LongformerConfig, LongformerModel

    from doctune_core.encoder import load_encoder

    if attention_window % 2:
        raise ValueError(f"attention_window must be even, got {attention_window}")
    bert, tokenizer = load_encoder(source_dir)
    source = bert.config
    if source.model_type not in ("bert", "roberta", "xlm-roberta", "electra"):
        raise ValueError(f"{source_dir}: model type {source.model_type!r} is not BERT-like; cannot make a Longformer")
    pad = tokenizer.pad_token_id
    # Longformer numbers positions from pad + 1 (RoBERTa's convention); BERT from 0.
    offset = pad + 1
    config = LongformerConfig(
        vocab_size=source.vocab_size,
        hidden_size=source.hidden_size,
        num_hidden_layers=source.num_hidden_layers,
        num_attention_heads=source.num_attention_heads,
        intermediate_size=source.intermediate_size,
        hidden_act=source.hidden_act,
        hidden_dropout_prob=source.hidden_dropout_prob,
        attention_probs_dropout_prob=source.attention_probs_dropout_prob,
        max_position_embeddings=max_length + offset,
        type_vocab_size=source.type_vocab_size,
        layer_norm_eps=source.layer_norm_eps,
        pad_token_id=pad,
        attention_window=[attention_window] * source.num_hidden_layers,
    )
    longformer = LongformerModel(config, add_pooling_layer=False)
    state = {k: v for k, v in bert.state_dict().items() if "position_ids" not in k}
    old_positions = state.pop("embeddings.position_embeddings.weight")  # (P, d), row i = position i
    usable = old_positions.shape[0] - (offset if source.model_type != "bert" else 0)
    first = offset if source.model_type != "bert" else 0
    new_positions = longformer.embeddings.position_embeddings.weight.detach().clone()
    for start in range(0, max_length, usable):  # copy the learned block again and again
        rows = min(usable, max_length - start)
        new_positions[offset + start : offset + start + rows] = old_positions[first : first + rows]
    state["embeddings.position_embeddings.weight"] = new_positions
    for layer in range(source.num_hidden_layers):
        prefix = f"encoder.layer.{layer}.attention.self."
        for name in GLOBAL_PROJECTIONS:
            for part in ("weight", "bias"):
                state[f"{prefix}{name}_global.{part}"] = state[f"{prefix}{name}.{part}"].clone()
    missing, unexpected = longformer.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise RuntimeError(f"conversion left weights unmatched: missing {missing}, unexpected {unexpected}")
    head = mlm_head_weights(source_dir)
    if head:  # keep the base's MLM head: save the masked-LM model, whose encoder AutoModel still loads
        from transformers import LongformerForMaskedLM

        with_head = LongformerForMaskedLM(config)
        with_head.longformer.load_state_dict(longformer.state_dict())
        missing, _ = with_head.load_state_dict(head, strict=False)
        absent = [k for k in missing if k.startswith("lm_head.") and k != "lm_head.decoder.weight"]
        if absent:
            raise RuntimeError(f"{source_dir}: its masked-LM head lacks {absent}")
        with_head.tie_weights()
        longformer = with_head
    target = Path(target_dir)
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    longformer.save_pretrained(partial, safe_serialization=True)
    tokenizer.model_max_length = max_length
    tokenizer.save_pretrained(partial)
    (partial / CONVERSION_RECORD).write_text(
        json.dumps(
            {
                "source": str(source_dir),
                "max_length": max_length,
                "attention_window": attention_window,
                # rows before it are the base's own; what trainers.trainable's "positions" trains starts here
                "first_new_position": offset + usable,
            }
        )
    )
    if target.exists():
        shutil.rmtree(target)
    os.replace(partial, target)
    return target


def cached_longformer(source_dir: str, max_length: int, attention_window: int, cache: Path) -> Path:
    """The converted model for (source weights, length, window), made once and kept in ``cache``."""
    from doctune_core.encoder import weights_digest

    key = f"{weights_digest(source_dir)[:16]}-L{max_length}-W{attention_window}"
    target = cache / "longformer" / key
    record = target / CONVERSION_RECORD
    # a conversion made before its record said where the new position rows start is made again
    if not (target / "config.json").exists() or "first_new_position" not in json.loads(record.read_text()):
        convert_to_longformer(source_dir, str(target), max_length, attention_window)
    return target


def cached_interpolated(converted: str | Path) -> Path:
    """``converted`` (a conversion made here) with its positions interpolated (``interpolate_positions``),
    untrained: the reference a trial that starts so is measured against. Made once, beside it."""
    from doctune_core.encoder import has_mlm_head, load_encoder

    converted = Path(converted)
    target = converted.with_name(converted.name + "-interpolated")
    if not (target / "config.json").exists():
        model, tokenizer = load_encoder(str(converted), with_mlm_head=has_mlm_head(str(converted)))
        interpolate_positions(model, first_new_position(converted))
        partial = target.with_name(target.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        model.save_pretrained(partial, safe_serialization=True)
        tokenizer.save_pretrained(partial)
        shutil.copyfile(converted / CONVERSION_RECORD, partial / CONVERSION_RECORD)
        os.replace(partial, target)
    return target


def first_new_position(model_dir: str | Path) -> int | None:
    """The first row of the position matrix a conversion added (rows before it are the base's own),
    or None for a model that was not converted here."""
    record = Path(model_dir) / CONVERSION_RECORD
    if not record.is_file():
        return None
    return json.loads(record.read_text()).get("first_new_position")


NOT_CONVERTED = (
    "position_init: interpolate re-fills the position rows a Longformer conversion adds, and this model has none: "
    "convert it (backbone.longformer) or keep position_init: copy"
)


def check_interpolable(model_dir: str | Path) -> None:
    """Raises ValueError (what to change) where the conversion in ``model_dir`` cannot have its
    positions interpolated: none made here, or a length not a multiple of the base's positions."""
    first_new = first_new_position(model_dir)
    if first_new is None:
        raise ValueError(NOT_CONVERTED)
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(str(model_dir))
    offset = config.pad_token_id + 1
    stretch(first_new - offset, config.max_position_embeddings - offset)


@torch.no_grad()
def interpolate_positions(model: nn.Module, first_new: int | None) -> None:
    """Re-fill the position table of a conversion made here (``model``: the encoder, or a masked-LM
    model around it; ``first_new``: ``first_new_position`` of its directory) by interpolating the
    base's rows instead of copying them (``doctune_core.position_interpolation``), in place, and mark its
    config so that ``doctune_core.encoder.encode`` reads the positions as interpolated. A model already
    interpolated is left as it is."""
    config = model.config
    if getattr(config, CONFIG_KEY, None):
        return
    if first_new is None:
        raise ValueError(NOT_CONVERTED)
    offset = config.pad_token_id + 1
    length = config.max_position_embeddings - offset
    table = model.base_model.embeddings.position_embeddings.weight
    table[offset:] = interpolated_rows(table[offset:first_new].clone(), length)
    setattr(config, CONFIG_KEY, stretch(first_new - offset, length))


def base_position_rows(model: nn.Module, first_new: int | None) -> torch.Tensor | None:
    """(rows,) bool: which rows of a converted ``model``'s position table are the base's own (the
    padding rows before the first position included), copied or interpolated; None where no
    conversion made here added rows."""
    if first_new is None:
        return None
    rows = torch.arange(model.base_model.embeddings.position_embeddings.weight.shape[0])
    scale = getattr(model.config, CONFIG_KEY, None)
    if not scale:
        return rows < first_new
    offset = model.config.pad_token_id + 1
    return (rows < offset) | ((rows - offset) % scale == 0)
