"""Positive-pair builders, one module per recipe, found by name through a small registry.

A recipe module registers a factory that takes a ``PairContext`` (the trial's hyperparameters,
the token budget, this worker's documents) and returns a builder: a function from one
sentence-split document and a seeded ``random.Random`` to a positive pair of texts
``(view_a, view_b)``, or ``None`` when the document cannot give one (the training loop drops and
counts those). Adding a recipe is one module that registers itself, plus its import below.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from trainers.config import Hyperparameters


class PairBuilder(Protocol):
    def __call__(self, sentences: list[str], rng: random.Random) -> tuple[str, str] | None: ...


@dataclass(frozen=True)
class PairContext:
    hp: Hyperparameters
    max_length: int  # tokens per view, special tokens included
    count_tokens: Callable[[str], int]  # word-piece tokens of a text, without special tokens
    documents: list[list[str]]  # this worker's shard (for corpus statistics: vocabulary, IDF)


_REGISTRY: dict[str, Callable[[PairContext], PairBuilder]] = {}


def register(name: str) -> Callable:
    def add(factory: Callable[[PairContext], PairBuilder]) -> Callable[[PairContext], PairBuilder]:
        _REGISTRY[name] = factory
        return factory

    return add


def recipes() -> list[str]:
    return sorted(_REGISTRY)


def build_pairs(context: PairContext) -> PairBuilder:
    recipe = context.hp.recipe
    if recipe not in _REGISTRY:
        raise KeyError(f"unknown recipe {recipe!r}; known: {', '.join(recipes())}")
    return _REGISTRY[recipe](context)


# Recipe modules register themselves on import.
from trainers.pairs import deca, docsplit, laser, simcse  # noqa: E402,F401
