"""DECA's word-level augmentations of a document.

Every augmentation takes a list of whitespace tokens and returns a new list; the rate ``p``
(``aug_p``) is the probability that an eligible token is changed (DECA §3.3 for the first three):

- ``synonym``: DECA's rule (``synonym_rule: paper``): every word is replaced by a uniform draw from
  its candidate set, its WordNet synonyms *and the word itself* ("the original word is also
  included in its synonym set ... for each word, we randomly select a word in the set of its
  replacement candidates"); ``synonym_rule: rate``: with probability ``p`` a word with a
  synonym is replaced by one drawn uniformly (EDA's rule).
- ``antonym``: an adjective or a verb (tagged by ``trainers.augment.pos``) with a WordNet antonym
  of its part of speech becomes "not <antonym>" ("big" -> "not small"; "man" stays "man"); the
  candidates are the antonyms of every lemma of the word's synsets (``WordNet.antonyms``: "strong"
  -> "not impotent", through "potent", as in §3.3).
- ``uninformative``: DECA's rule: a rare word (seen fewer than ``LOW_FREQUENCY`` times in the
  corpus, the threshold of the work §3.3 cites) that has frequent WordNet synonyms is replaced,
  with probability ``p``, by one of them, drawn in proportion to its corpus frequency.
- ``tfidf_uda``: UDA's TF-IDF rule (a different operation, kept under its own name): token *i* is
  replaced with probability ``min(1, p * (C - s_i) / mean_j(C - s_j))``, where ``s`` is the
  token's TF-IDF in the document and ``C`` its maximum there, so informative words survive; the
  replacement is drawn from the vocabulary with probability proportional to ``max_idf - idf(w)``.
- ``deletion``: each token is deleted with probability ``p`` (at least one token is kept).
- ``swap``: ``max(1, round(p * n))`` swaps of two random positions (EDA's random swap).
- ``back_translation`` (sentence level, ``trainers.augment.back_translation``): needs two local
  MT models named in ``translation_models``.

Dictionary constraint (DECA §3.3, §4.4): synonym and antonym replacements are taken only from
words of the corpus vocabulary seen at least ``LOW_FREQUENCY`` times ("filter out the ones out of
vocabulary or with low frequencies"). Punctuation around a token and a leading capital are kept.
Replacements are base forms: inflection is not re-applied.

DECA: Luo, Cheng et al., "Unsupervised Document Embedding via Contrastive Augmentation"; UDA: Xie
et al., "Unsupervised Data Augmentation for Consistency Training" (NeurIPS 2020), Appendix B; EDA:
Wei & Zou (2019).
"""

from __future__ import annotations

import math
import random
import re
from collections import Counter
from collections.abc import Callable, Sequence

AUGMENTATIONS = ("synonym", "antonym", "uninformative", "tfidf_uda", "deletion", "swap", "back_translation")
# DECA §3.3: words seen fewer times are "low frequent" (the prior work it cites replaces words seen
# fewer than 10 times, Chen et al. 2019)
LOW_FREQUENCY = 10
UNAVAILABLE = {
    "ppdb": "PPDB paraphrase replacement needs the PPDB database, which no package ships; "
    "use synonym, antonym, uninformative, tfidf_uda, deletion, swap, or back_translation with your own MT models",
}
_CORE = re.compile(r"^(\W*)(.*?)(\W*)$", re.S)


class AugmentationUnavailable(ValueError):
    pass


def _split(token: str) -> tuple[str, str, str]:
    lead, core, trail = _CORE.match(token).groups()
    return lead, core, trail


def _dress(token: str, replacement: str) -> str:
    lead, core, trail = _split(token)
    if core[:1].isupper():
        replacement = replacement[:1].upper() + replacement[1:]
    return f"{lead}{replacement}{trail}"


class IdfTable:
    """Inverse document frequencies over a corpus (lower-cased word cores)."""

    def __init__(self, documents: Sequence[Sequence[str]]) -> None:
        frequency = Counter()
        for tokens in documents:
            frequency.update({_split(t)[1].lower() for t in tokens} - {""})
        n = max(1, len(documents))
        self.idf = {w: math.log(n / df) for w, df in frequency.items()}
        self.default = math.log(n)
        top = max(self.idf.values(), default=0.0)
        self.words = sorted(self.idf)
        self.cumulative: list[float] = []
        total = 0.0
        for w in self.words:
            total += top - self.idf[w] + 1e-6
            self.cumulative.append(total)

    def draw_uninformative(self, rng: random.Random) -> str:
        import bisect

        return self.words[bisect.bisect_left(self.cumulative, rng.random() * self.cumulative[-1])]


def synonyms_with_self(tokens: list[str], rng: random.Random, candidates: Callable[[str], list[str]]) -> list[str]:
    """DECA's synonym rule: each word redrawn uniformly from its synonyms and itself."""
    out = []
    for token in tokens:
        core = _split(token)[1]
        options = candidates(core)
        choice = rng.randrange(len(options) + 1) if core and options else len(options)
        out.append(_dress(token, options[choice]) if choice < len(options) else token)
    return out


def cores(tokens: list[str]) -> tuple[str, ...]:
    """Each token without the punctuation around it."""
    return tuple(_split(t)[1] for t in tokens)


def replace_lexical(
    tokens: list[str], p: float, rng: random.Random, candidates: Callable[[str], list[str]]
) -> list[str]:
    """With probability ``p``, each token with candidates becomes one of them, drawn uniformly."""
    out = []
    for token in tokens:
        core = _split(token)[1]
        options = candidates(core) if core else []
        out.append(_dress(token, rng.choice(options)) if options and rng.random() < p else token)
    return out


def negated_antonyms(
    tokens: list[str],
    p: float,
    rng: random.Random,
    antonyms: Callable[[str, str], list[str]],
    tags: Sequence[str | None],
) -> list[str]:
    """With probability ``p``, each adjective or verb (``tags``: WordNet's ``a`` or ``v``, else
    None) with an antonym of its part of speech becomes "not <antonym>"."""
    out = []
    for token, tag in zip(tokens, tags):
        options = antonyms(_split(token)[1], tag) if tag else []
        out.append(_dress(token, f"not {rng.choice(options)}") if options and rng.random() < p else token)
    return out


def rare_to_frequent(
    tokens: list[str], p: float, rng: random.Random, counts: Counter, synonyms: Callable[[str], list[str]]
) -> list[str]:
    """DECA's uninformative-word replacement: with probability ``p`` a rare word becomes one of its
    frequent synonyms, drawn in proportion to corpus frequency."""
    out = []
    for token in tokens:
        core = _split(token)[1]
        options = []
        if core and counts[core.lower()] < LOW_FREQUENCY:
            options = [w for w in synonyms(core) if counts[w] >= LOW_FREQUENCY]
        if options and rng.random() < p:
            out.append(_dress(token, rng.choices(options, weights=[counts[w] for w in options])[0]))
        else:
            out.append(token)
    return out


def tfidf_uda(tokens: list[str], p: float, rng: random.Random, idf: IdfTable) -> list[str]:
    cores = [_split(t)[1].lower() for t in tokens]
    counts = Counter(cores)
    scores = [counts[c] / len(tokens) * idf.idf.get(c, idf.default) for c in cores]
    top = max(scores, default=0.0)
    mean_gap = sum(top - s for s in scores) / max(1, len(scores))
    out = []
    for token, score in zip(tokens, scores):
        chance = min(1.0, p * (top - score) / mean_gap) if mean_gap > 0 else p
        out.append(_dress(token, idf.draw_uninformative(rng)) if rng.random() < chance else token)
    return out


def deletion(tokens: list[str], p: float, rng: random.Random) -> list[str]:
    kept = [t for t in tokens if rng.random() >= p]
    return kept or [rng.choice(tokens)]


def swap(tokens: list[str], p: float, rng: random.Random) -> list[str]:
    out = list(tokens)
    if len(out) < 2:
        return out
    for _ in range(max(1, round(p * len(out)))):
        i, j = rng.sample(range(len(out)), 2)
        out[i], out[j] = out[j], out[i]
    return out


def check_augmentation(name: str) -> None:
    if name in UNAVAILABLE:
        raise AugmentationUnavailable(f"augmentation {name!r}: {UNAVAILABLE[name]}")
    if name not in AUGMENTATIONS:
        raise AugmentationUnavailable(f"unknown augmentation {name!r}; known: {', '.join(AUGMENTATIONS)}")
