"""What a positive-pair recipe is (``Recipe``, its ``PairContext`` and ``PairBuilder``) and the registry
its modules join by name (``RECIPES``); ``trainers.pairs`` imports every recipe module and re-exports
these."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar, Generic, Protocol, TypeVar

from doctune_core.data.corpus import CorpusStats
from doctune_core.registry import Registry
from trainers.config import Hyperparameters, NoSettings, own_settings
from trainers.losses.base import CONTRASTIVE_LOSSES

Settings = TypeVar("Settings")


class PairBuilder(Protocol):
    def __call__(self, sentences: list[str], rng: random.Random) -> tuple[str, str] | None: ...


@dataclass(frozen=True)
class PairContext(Generic[Settings]):
    settings: Settings  # the recipe's own settings (its ``settings`` class), nothing else of the trial's
    max_length: int  # tokens per view, special tokens included
    count_tokens: Callable[[str], int]  # word-piece tokens of a text, without special tokens
    documents: Sequence[list[str]]  # this worker's first documents, for corpus statistics (vocabulary, IDF)


# a worker's corpus statistics are read from its first this many documents, so that its memory and
# start-up stay the same however large the corpus (the packaged corpus is read whole)
STATISTICS_DOCUMENTS = 20_000


class Recipe:
    """A positive-pair recipe. ``pairs`` builds the trial's pair builder (once per worker, so it
    may precompute corpus statistics from ``context.documents``). ``loss`` names the contrastive
    loss its paper trains with (``trainers.losses``), the one a trial uses where
    ``hyperparameters.loss`` is unset (None: the default loss, ``recipe_loss``). ``settings`` is the
    frozen dataclass of the recipe's own settings: each field (with ``doctune_core.fields.constraint``
    metadata: help line and range) joins the flat namespace of a spec's ``hyperparameters:`` and
    ``search.space:`` (``trainers.settings``), and ``pairs`` receives their values as
    ``context.settings``. ``views`` names the augmentation types the recipe makes (the hyperparameter
    ``views``), each with the values of its own settings that type fixes (DocSplit's ``elongate``)."""

    loss: str | None = None
    settings: type = NoSettings
    views: ClassVar[dict[str, dict]] = {}  # augmentation type (``views``) -> the settings it fixes

    def pairs(self, context: PairContext) -> PairBuilder:
        raise NotImplementedError

    def corpus_problem(self, stats: CorpusStats) -> str | None:
        """Why a prepared corpus cannot train this recipe (the driver refuses it with this
        message before any trial starts), or None."""
        return None


RECIPES: Registry[type[Recipe]] = Registry("recipe")


@dataclass(frozen=True)
class ViewMaking:
    """How one augmentation type (``Hyperparameters.views``) makes a document's two views: the
    recipe that makes them, and the recipe's own settings it fixes."""

    recipe: str
    settings: dict


def view_makings() -> Registry[ViewMaking]:
    """Every augmentation type, as the recipes declare them (their ``views``)."""
    found: Registry[ViewMaking] = Registry("augmentation type")
    for name in RECIPES:
        for views, settings in RECIPES[name].views.items():
            found.register(views)(ViewMaking(name, settings))
    return found


def recipes() -> list[str]:
    return RECIPES.names()


def build_pairs(
    hp: Hyperparameters, max_length: int, count_tokens: Callable[[str], int], documents: Sequence[list[str]]
) -> PairBuilder:
    """The pair builder of the trial's recipe (``hp``: its ``TrialSettings``), given its own settings."""
    recipe = RECIPES[hp.recipe]
    return recipe().pairs(PairContext(own_settings(hp, recipe.settings), max_length, count_tokens, documents))


def recipe_loss(recipe: str) -> str:
    """The contrastive loss ``recipe`` trains with where a spec names none: its own, else the default loss."""
    return RECIPES[recipe].loss or CONTRASTIVE_LOSSES.default


def contrastive_loss_name(hp: Hyperparameters) -> str:
    """The contrastive loss a trial trains with: ``hp.loss``, or where unset its recipe's (``recipe_loss``)."""
    return hp.loss or recipe_loss(hp.recipe)
