"""The files that let sentence-transformers load an exported encoder (Transformer -> Pooling ->
Normalize, in the format its releases from 3.0 on read); sentence-transformers itself is not
imported. A Longformer's Transformer is doctune's ``modeling_doctune.GlobalAttentionTransformer``
(global attention on [CLS]), loaded with ``trust_remote_code=True``."""

from __future__ import annotations

import importlib.util
import json
import shutil
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class PoolingExport:
    """How one of doctune's poolings (``doctune_core.encoder.pool``) is written outside doctune."""

    st_flag: str  # the sentence-transformers Pooling flag that computes the same vector
    torch_expression: str  # the same pooling over ``hidden`` (N, L, d) and ``mask`` (N, L, 1), for the card


# Every pooling doctune_core.encoder.pool offers, each with its exact sentence-transformers equivalent
# (tests/platform/test_export.py compares the embeddings). A pooling missing here gets no
# sentence-transformers files rather than wrong ones.
POOLINGS: dict[str, PoolingExport] = {
    "mean": PoolingExport("pooling_mode_mean_tokens", "(hidden * mask).sum(1) / mask.sum(1)"),
    "cls": PoolingExport("pooling_mode_cls_token", "hidden[:, 0]"),
    "max": PoolingExport("pooling_mode_max_tokens", 'hidden.masked_fill(mask == 0, float("-inf")).max(1).values'),
}


# sentence-transformers 3.x reads these flags (later releases convert them); all are written, one true
ST_POOLING_FLAGS = (
    "pooling_mode_cls_token",
    "pooling_mode_mean_tokens",
    "pooling_mode_max_tokens",
    "pooling_mode_mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens",
    "pooling_mode_lasttoken",
)


# A Longformer's first module: sentence-transformers' Transformer with [CLS] attending globally, as
# doctune_core.encoder.encode has it (modeling_doctune.py, copied beside the model: trust_remote_code loads it)
GLOBAL_ATTENTION_MODULE = Path(__file__).with_name("modeling_doctune.py")
GLOBAL_ATTENTION_TYPE = "modeling_doctune.GlobalAttentionTransformer"
# what it imports beside it: how a model with interpolated positions reads them
POSITIONS_MODULE = Path(importlib.util.find_spec("doctune_core.position_interpolation").origin)


def needs_remote_code(model_type: str) -> bool:
    """Whether the exported model's sentence-transformers modules include doctune's own (a Longformer's)."""
    return model_type == "longformer"


def sentence_transformers_gap(pooling: str, model_type: str) -> str | None:
    """Why sentence-transformers would embed differently from doctune, or None if it embeds the same."""
    if pooling not in POOLINGS:
        return f"doctune's {pooling!r} pooling has no sentence-transformers equivalent"
    return None


def write_sentence_transformers_files(directory: Path, pooling: PoolingExport, config: dict, max_length: int) -> None:
    """Transformer -> Pooling -> Normalize, as sentence-transformers lays a model out on disk; a
    Longformer's Transformer is ``GLOBAL_ATTENTION_TYPE``, its file copied beside the model."""
    transformer = "sentence_transformers.models.Transformer"
    if needs_remote_code(config.get("model_type", "")):
        shutil.copyfile(GLOBAL_ATTENTION_MODULE, directory / GLOBAL_ATTENTION_MODULE.name)
        shutil.copyfile(POSITIONS_MODULE, directory / POSITIONS_MODULE.name)
        transformer = GLOBAL_ATTENTION_TYPE
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": transformer},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        # doctune's embeddings are L2-normalised (doctune_core.encoder.embed_texts)
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ]
    _write_json(directory / "modules.json", modules)
    # the tokenizer lowercases by itself where its model needs it
    _write_json(directory / "sentence_bert_config.json", {"max_seq_length": max_length, "do_lower_case": False})
    _write_json(
        directory / "config_sentence_transformers.json",
        {"prompts": {}, "default_prompt_name": None, "similarity_fn_name": "cosine"},
    )
    flags = {flag: flag == pooling.st_flag for flag in ST_POOLING_FLAGS}
    _write_json(
        directory / "1_Pooling" / "config.json",
        {"word_embedding_dimension": config["hidden_size"], **flags, "include_prompt": True},
    )
    # Normalize has no parameters; a file keeps the folder when the model is copied or uploaded
    _write_json(directory / "2_Normalize" / "config.json", {})


def _write_json(path: Path, value: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2) + "\n")
