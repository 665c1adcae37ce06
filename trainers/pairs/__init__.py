"""Positive-pair builders, one module per recipe, found by name through a small registry.

A builder is made from a trial's ``Hyperparameters`` and turns one sentence-split document into
a positive pair of texts ``(view_a, view_b)``, or ``None`` when the document cannot give one
(the training loop counts those). Adding a recipe is one module that registers itself here.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Protocol

from trainers.config import Hyperparameters


class PairBuilder(Protocol):
    def __call__(self, sentences: list[str], rng: random.Random) -> tuple[str, str] | None: ...


_REGISTRY: dict[str, Callable[[Hyperparameters], PairBuilder]] = {}


def register(name: str) -> Callable:
    def add(factory: Callable[[Hyperparameters], PairBuilder]) -> Callable[[Hyperparameters], PairBuilder]:
        _REGISTRY[name] = factory
        return factory

    return add


def recipes() -> list[str]:
    return sorted(_REGISTRY)


def build_pairs(recipe: str, hp: Hyperparameters) -> PairBuilder:
    if recipe not in _REGISTRY:
        raise KeyError(f"unknown recipe {recipe!r}; known: {', '.join(recipes())}")
    return _REGISTRY[recipe](hp)


# Recipe modules register themselves on import.
from trainers.pairs import docsplit  # noqa: E402,F401
