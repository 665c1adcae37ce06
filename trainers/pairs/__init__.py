"""Positive-pair recipes, one module per recipe, each a ``Recipe`` registered by name.

A recipe turns one sentence-split document and a seeded ``random.Random`` into a positive pair of
texts ``(view_a, view_b)``, or ``None`` when the document cannot give one (the training loop
drops and counts those). It declares its own settings (its ``settings`` dataclass; a spec names
them beside the others, ``trainers.settings``), receives only those, and may refuse a corpus it
cannot train on before anything starts. Adding a recipe is one module here (docs/plugins.md).
"""

from __future__ import annotations

from doctune_core.registry import import_plugins
from trainers.pairs.base import (
    RECIPES,
    STATISTICS_DOCUMENTS,
    PairBuilder,
    PairContext,
    Recipe,
    ViewMaking,
    build_pairs,
    contrastive_loss_name,
    recipe_loss,
    recipes,
    view_makings,
)

import_plugins(__name__, __path__, "doctune.recipes")
VIEWS = view_makings()  # augmentation type -> how its recipe makes it

__all__ = [
    "RECIPES",
    "STATISTICS_DOCUMENTS",
    "VIEWS",
    "PairBuilder",
    "PairContext",
    "Recipe",
    "ViewMaking",
    "build_pairs",
    "contrastive_loss_name",
    "recipe_loss",
    "recipes",
]
