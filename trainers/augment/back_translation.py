"""Back-translation for DECA: a sentence translated into a pivot language and back.

Needs two local sequence-to-sequence translation models (``translation_models:
"FORWARD_DIR,BACKWARD_DIR"``, e.g. Marian en->de and de->en saved with ``save_pretrained``): no
package ships such models, so doctune names none by default and refuses the augmentation with
the reason when they are missing. Each sentence is round-tripped once (greedy decoding, so the
result is deterministic) and cached; ``aug_p`` is the probability that a sentence is replaced by
its round trip.

Sennrich et al., "Improving Neural Machine Translation Models with Monolingual Data" (ACL 2016);
used as a document augmentation by UDA (Xie et al. 2020) and DECA.
"""

from __future__ import annotations

import random
from pathlib import Path

import torch

MAX_NEW_TOKENS = 128


def parse_model_pair(spec: str) -> tuple[Path, Path]:
    """``"FORWARD,BACKWARD"`` -> two model directories; ``ValueError`` saying what is wrong."""
    parts = [p.strip() for p in spec.split(",") if p.strip()]
    if len(parts) != 2:
        raise ValueError(
            "back_translation needs translation_models: 'FORWARD_DIR,BACKWARD_DIR' (two local sequence-to-sequence "
            "translation models, e.g. Marian en-de and de-en); no package ships them"
        )
    dirs = tuple(Path(p).expanduser() for p in parts)
    for d in dirs:
        if not (d / "config.json").exists():
            raise ValueError(f"translation model directory {d} does not exist or has no config.json")
    return dirs  # type: ignore[return-value]


class BackTranslator:
    def __init__(self, forward_dir: Path, backward_dir: Path) -> None:
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

        self.steps = [
            (AutoTokenizer.from_pretrained(d), AutoModelForSeq2SeqLM.from_pretrained(d).eval())
            for d in (forward_dir, backward_dir)
        ]
        self.cache: dict[str, str] = {}

    @torch.inference_mode()
    def _translate(self, texts: list[str], step: int) -> list[str]:
        tokenizer, model = self.steps[step]
        batch = tokenizer(texts, return_tensors="pt", padding=True, truncation=True, max_length=MAX_NEW_TOKENS)
        batch.pop("token_type_ids", None)
        out = model.generate(**batch, max_new_tokens=MAX_NEW_TOKENS, do_sample=False, num_beams=1)
        return [t.strip() for t in tokenizer.batch_decode(out, skip_special_tokens=True)]

    def round_trip(self, sentences: list[str]) -> list[str]:
        missing = [s for s in dict.fromkeys(sentences) if s not in self.cache]
        if missing:
            back = self._translate(self._translate(missing, 0), 1)
            self.cache.update(zip(missing, back))
        return [self.cache[s] or s for s in sentences]

    def augment(self, sentences: list[str], p: float, rng: random.Random) -> list[str]:
        chosen = [s for s in sentences if rng.random() < p]
        replaced = dict(zip(chosen, self.round_trip(chosen))) if chosen else {}
        return [replaced.get(s, s) for s in sentences]
