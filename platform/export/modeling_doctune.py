"""A sentence-transformers module that runs a Longformer as doctune does: global attention on the
first token ([CLS]) of every text, local (sliding-window) attention everywhere else.

Copied beside an exported Longformer (``best/modeling_doctune.py``) and named in its
``modules.json``, so that

    SentenceTransformer("runs/docsplit_long/best", trust_remote_code=True)

embeds as doctune's evaluators did, texts longer than the attention window included (without it,
sentence-transformers would give no token global attention). It imports nothing but
sentence-transformers and torch, so the exported directory needs no doctune installed.
"""

from __future__ import annotations

import torch

try:  # sentence-transformers 6
    from sentence_transformers.sentence_transformer.modules import Transformer
except ImportError:  # 3.x to 5.x
    from sentence_transformers.models import Transformer


class GlobalAttentionTransformer(Transformer):
    """``sentence_transformers.models.Transformer`` with [CLS] as the one globally attending token."""

    def forward(self, features: dict, **kwargs) -> dict:
        if "input_ids" in features and "global_attention_mask" not in features:
            global_attention = torch.zeros_like(features["input_ids"])
            global_attention[:, 0] = 1
            features = {**features, "global_attention_mask": global_attention}
        return super().forward(features, **kwargs)
