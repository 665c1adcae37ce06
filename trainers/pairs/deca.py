"""DECA positive pairs: a document vs. a word-level augmented copy of itself.

The augmentation (``augmentation``) and its rate (``aug_p``) are searched; the operations are in
``trainers.augment.word_level``. With ``dictionary_constraint`` (DECA's default), synonym and
antonym replacements come only from words this worker's corpus holds at least
``LOW_FREQUENCY`` times; DECA's uninformative-word rule reads the same counts. Trained, as in the
paper (§3.2), with its SimCLR-based loss as printed in Eq. 4 (``deca_ntxent``, the default for
this recipe) or with SimSiam (``loss: simsiam``). The paper's Doc2vecC backbone is not offered
(doctune trains transformer encoders; docs/recipes.md).

DECA: Luo, Cheng et al., "Unsupervised Document Embedding via Contrastive Augmentation" (§3.2 for
the losses, §3.3 for the augmentations); the rate rule follows EDA (Wei & Zou 2019), ``tfidf_uda``
UDA (Xie et al. 2020).
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from typing import ClassVar, Literal

from doctune_core.fields import constraint
from trainers.augment.word_level import (
    LOW_FREQUENCY,
    IdfTable,
    check_augmentation,
    cores,
    deletion,
    negated_antonyms,
    rare_to_frequent,
    replace_lexical,
    swap,
    synonyms_with_self,
    tfidf_uda,
)
from trainers.pairs.base import RECIPES, PairBuilder, PairContext, Recipe


@dataclass(frozen=True)
class DecaSettings:
    augmentation: str = field(
        default="synonym",
        metadata=constraint(
            "deca: synonym, antonym, uninformative (DECA's rare -> frequent synonyms), tfidf_uda (UDA's rule), "
            "deletion, swap or back_translation",
            check=check_augmentation,  # known, and its packages installed
        ),
    )
    aug_p: float = field(
        default=0.1, metadata=constraint("deca: probability that an eligible word is changed", 0.0, 1.0, low_open=True)
    )
    synonym_rule: Literal["paper", "rate"] = field(
        default="paper",
        metadata=constraint(
            "deca synonym: paper (every word redrawn from its synonyms and itself, DECA Sec. 3.3) or rate (aug_p)"
        ),
    )
    dictionary_constraint: bool = field(
        default=True, metadata=constraint("deca: replacement words only from the corpus vocabulary")
    )
    translation_models: str = field(
        default="", metadata=constraint("deca back_translation: 'FORWARD_DIR,BACKWARD_DIR', two local MT models")
    )


def corpus_counts(documents: list[list[str]]) -> Counter:
    """How often each lower-cased word (punctuation stripped) occurs in the documents."""
    return Counter(word.strip(".,;:!?\"'()[]").lower() for doc in documents for s in doc for word in s.split())


def make_augmenter(own: DecaSettings, documents: list[list[str]]):
    """A function ``(tokens, rng) -> tokens`` for ``own.augmentation``."""
    name, p = own.augmentation, own.aug_p
    check_augmentation(name)
    if name == "deletion":
        return lambda tokens, rng: deletion(tokens, p, rng)
    if name == "swap":
        return lambda tokens, rng: swap(tokens, p, rng)
    if name == "tfidf_uda":
        idf = IdfTable([" ".join(doc).split() for doc in documents])
        return lambda tokens, rng: tfidf_uda(tokens, p, rng, idf)
    from trainers.augment.wordnet import wordnet

    lexicon = wordnet()
    counts = corpus_counts(documents)

    def allowed(word: str) -> bool:
        return not own.dictionary_constraint or all(counts[w] >= LOW_FREQUENCY for w in word.split())

    synonyms = lru_cache(maxsize=None)(lambda core: [w for w in lexicon.synonyms(core) if allowed(w)])
    if name == "uninformative":
        return lambda tokens, rng: rare_to_frequent(tokens, p, rng, counts, lexicon.synonyms)
    if name == "synonym" and own.synonym_rule == "paper":
        return lambda tokens, rng: synonyms_with_self(tokens, rng, synonyms)
    if name == "synonym":
        return lambda tokens, rng: replace_lexical(tokens, p, rng, synonyms)
    from trainers.augment.pos import wordnet_pos

    antonyms = lru_cache(maxsize=None)(lambda core, pos: [w for w in lexicon.antonyms(core, pos) if allowed(w)])
    return lambda tokens, rng: negated_antonyms(tokens, p, rng, antonyms, wordnet_pos(cores(tokens)))


def back_translation_pairs(context: PairContext[DecaSettings]):
    from trainers.augment.back_translation import BackTranslator, parse_model_pair

    own = context.settings
    translator = BackTranslator(*parse_model_pair(own.translation_models))

    def build(sentences: list[str], rng: random.Random) -> tuple[str, str] | None:
        if not sentences:
            return None
        return " ".join(sentences), " ".join(translator.augment(sentences, own.aug_p, rng))

    return build


@RECIPES.register("deca")
class DECA(Recipe):
    """Trains with the paper's Eq. 4 unless ``loss`` says otherwise."""

    views: ClassVar[dict[str, dict]] = {"word": {}}  # word-level operations

    loss = "deca_ntxent"
    settings = DecaSettings

    def pairs(self, context: PairContext[DecaSettings]) -> PairBuilder:
        if context.settings.augmentation == "back_translation":
            return back_translation_pairs(context)
        augment = make_augmenter(context.settings, context.documents)

        def build(sentences: list[str], rng: random.Random) -> tuple[str, str] | None:
            tokens = " ".join(sentences).split()[: context.max_length]  # words past the token budget are cut anyway
            if not tokens:
                return None
            return " ".join(tokens), " ".join(augment(tokens, rng))

        return build
