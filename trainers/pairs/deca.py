"""DECA positive pairs: a document vs. a word-level augmented copy of itself.

The augmentation (``augmentation``) and its rate (``aug_p``) are searched; the operations are in
``trainers.augment.word_level``. With ``dictionary_constraint`` (DECA's default), synonym and
antonym replacements come only from this worker's corpus vocabulary; the uninformative-word rule
draws from the corpus vocabulary by construction. Trained with NT-Xent (SimCLR) or SimSiam
(``loss``), as in the paper.

DECA: "DECA: Document Embedding with Contrastive Augmentation"; the augmentations follow EDA (Wei
& Zou 2019) and UDA (Xie et al. 2020).
"""

from __future__ import annotations

import random

from trainers.augment.word_level import (
    IdfTable,
    check_augmentation,
    deletion,
    replace_lexical,
    swap,
    uninformative,
)
from trainers.pairs import PairContext, register


def corpus_vocabulary(documents: list[list[str]]) -> set[str]:
    return {word.strip(".,;:!?\"'()[]").lower() for doc in documents for s in doc for word in s.split()}


def make_augmenter(name: str, p: float, documents: list[list[str]], dictionary_constraint: bool):
    """A function ``(tokens, rng) -> tokens`` for augmentation ``name``."""
    check_augmentation(name)
    if name == "deletion":
        return lambda tokens, rng: deletion(tokens, p, rng)
    if name == "swap":
        return lambda tokens, rng: swap(tokens, p, rng)
    if name == "uninformative":
        idf = IdfTable([" ".join(doc).split() for doc in documents])
        return lambda tokens, rng: uninformative(tokens, p, rng, idf)
    from trainers.augment.wordnet import wordnet

    lexicon = wordnet()
    vocabulary = corpus_vocabulary(documents) if dictionary_constraint else None
    if name == "synonym":
        return lambda tokens, rng: replace_lexical(tokens, p, rng, lexicon.synonyms, vocabulary)
    return lambda tokens, rng: replace_lexical(tokens, p, rng, lexicon.antonyms, vocabulary, lambda w: f"not {w}")


def back_translation_pairs(context: PairContext):
    from trainers.augment.back_translation import BackTranslator, parse_model_pair

    hp = context.hp
    translator = BackTranslator(*parse_model_pair(hp.translation_models))

    def build(sentences: list[str], rng: random.Random) -> tuple[str, str] | None:
        if not sentences:
            return None
        return " ".join(sentences), " ".join(translator.augment(sentences, hp.aug_p, rng))

    return build


@register("deca")
def deca_pairs(context: PairContext):
    hp = context.hp
    if hp.augmentation == "back_translation":
        return back_translation_pairs(context)
    augment = make_augmenter(hp.augmentation, hp.aug_p, context.documents, hp.dictionary_constraint)

    def build(sentences: list[str], rng: random.Random) -> tuple[str, str] | None:
        tokens = " ".join(sentences).split()[: context.max_length]  # words past the token budget are cut anyway
        if not tokens:
            return None
        return " ".join(tokens), " ".join(augment(tokens, rng))

    return build
