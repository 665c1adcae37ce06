"""A sentence-transformers module that runs a Longformer as doctune does: global attention on the
first token ([CLS]) of every text, local (sliding-window) attention everywhere else.

Copied beside an exported Longformer (``best/modeling_doctune.py``) and named in its
``modules.json``, so that

    SentenceTransformer("runs/docsplit_long/best", trust_remote_code=True)

embeds as doctune's evaluators did, texts longer than the attention window included (without it,
sentence-transformers would give no token global attention). A model whose positions were
interpolated (``position_init: interpolate``) reads them as doctune does, through
``position_interpolation.py`` (doctune's ``doctune_core/position_interpolation.py``, copied beside this
file: the relative import below resolves there, in the exported directory, not in doctune). It
imports nothing but sentence-transformers and torch, so the exported directory needs no doctune
installed.
"""

from __future__ import annotations

import torch

try:  # sentence-transformers 6
    from sentence_transformers.sentence_transformer.modules import Transformer
except ImportError:  # 3.x to 5.x
    from sentence_transformers.models import Transformer

from .position_interpolation import CONFIG_KEY, position_ids


class GlobalAttentionTransformer(Transformer):
    """``sentence_transformers.models.Transformer`` with [CLS] as the one globally attending token,
    and interpolated positions read as doctune reads them."""

    def forward(self, features: dict, **kwargs) -> dict:
        if "input_ids" in features and "global_attention_mask" not in features:
            global_attention = torch.zeros_like(features["input_ids"])
            global_attention[:, 0] = 1
            features = {**features, "global_attention_mask": global_attention}
        config = (getattr(self, "auto_model", None) or self.model).config  # sentence-transformers 3-5, 6
        scale = getattr(config, CONFIG_KEY, None)
        if scale and "attention_mask" in features and "position_ids" not in features:
            offset = config.pad_token_id + 1
            ids = position_ids(features["attention_mask"], scale, offset, config.max_position_embeddings - offset)
            features = {**features, "position_ids": ids}
        return super().forward(features, **kwargs)
