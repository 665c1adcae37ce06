"""A trial's settings as one flat namespace (``TrialSettings``), assembled from their owners.

``trainers.config.Hyperparameters`` holds what every trial reads; each recipe, contrastive loss
and the Bregman and anchor terms own theirs, a frozen dataclass in their own module (their ``settings``). A
spec's ``hyperparameters:`` and ``search.space:``, Optuna's parameters and a leaderboard row name
them all side by side (``split_probability``, ``temperature``, ``bregman_k``), so this module joins
them into one dataclass, once, from the registries: adding a recipe with settings adds its fields
here with no other file changed. A field two owners share (``temperature`` of the softmax losses,
the elongation range of LA(SER)^3 and DocSplit) is one field, declared once in a settings class
both inherit; two different declarations of one name are refused at import.

A trial holds a ``TrialSettings``; a plug-in receives only its own settings from it
(``trainers.config.own_settings``). For type checkers and editors, ``TrialSettings`` is also declared
as a class over doctune's own plug-ins' settings classes (a separately installed plug-in's fields
exist at run time only); a new built-in settings class joins that declaration, which a test checks.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import Field

from trainers.config import Hyperparameters
from trainers.losses import CONTRASTIVE_LOSSES, AnchorSettings, BregmanSettings
from trainers.pairs import RECIPES, VIEWS


def settings_owners() -> dict[str, type]:
    """Each owner of settings of its own (as a spec's docs name it) -> its settings class."""
    owners = {f"recipe {name}": RECIPES[name].settings for name in RECIPES}
    owners |= {f"loss {name}": CONTRASTIVE_LOSSES[name].settings for name in CONTRASTIVE_LOSSES}
    return owners | {"the Bregman term": BregmanSettings, "the anchor term": AnchorSettings}


@dataclasses.dataclass(frozen=True)
class Setting:
    """One name of the flat namespace: its dataclass field, its type, and who reads it."""

    field: Field
    hint: object
    owners: tuple[str, ...]  # empty: every trial (``Hyperparameters``)


def _settings() -> dict[str, Setting]:
    found = {f.name: Setting(f, hint, ()) for f, hint in _fields_of(Hyperparameters)}
    for owner, settings in settings_owners().items():
        for field, hint in _fields_of(settings):
            known = found.get(field.name)
            if known is None:
                found[field.name] = Setting(field, hint, (owner,))
            elif known.owners and _same(known, field, hint):
                found[field.name] = dataclasses.replace(known, owners=(*known.owners, owner))
            else:
                read_by = ", ".join(known.owners) or "every trial (trainers.config.Hyperparameters)"
                raise TypeError(
                    f"setting {field.name!r} of {owner} is declared again, differently, for {read_by}: "
                    "a shared setting is one field both settings classes inherit; otherwise rename it"
                )
    return found


def _fields_of(settings: type) -> list[tuple[Field, object]]:
    hints = typing.get_type_hints(settings)
    return [(f, hints[f.name]) for f in dataclasses.fields(settings)]


def _same(known: Setting, field: Field, hint: object) -> bool:
    return (known.field.default, known.field.metadata, known.hint) == (field.default, field.metadata, hint)


def _decide_recipe(settings) -> None:
    """The one place a trial's recipe is decided: an augmentation type (``views``) becomes its recipe
    and the settings it fixes, as the recipe declares them (``Recipe.views``); with neither set, the
    default recipe (``RECIPES.default``)."""
    if settings.recipe is None and settings.views is None:
        object.__setattr__(settings, "recipe", RECIPES.default)
    if settings.views is not None:
        making = VIEWS[settings.views]
        object.__setattr__(settings, "recipe", making.recipe)
        for name, value in making.settings.items():
            object.__setattr__(settings, name, value)


SETTINGS: dict[str, Setting] = _settings()
"""Every name of the flat namespace -> its ``Setting``: ``Hyperparameters``' first, then each owner's."""

PERTURBABLE = tuple(name for name, s in SETTINGS.items() if s.field.metadata.get("perturbable"))
"""What a trial may change when it goes on from another trial's checkpoint (PBT), as each setting's
owner declares it (``doctune_core.fields.constraint(perturbable=True)``)."""

if typing.TYPE_CHECKING:
    from trainers.losses.info_nce import InfoNCESettings
    from trainers.pairs.crops import CropSettings
    from trainers.pairs.deca import DecaSettings
    from trainers.pairs.docsplit import DocSplitSettings
    from trainers.pairs.laser import LaserSettings
    from trainers.pairs.span import SpanSettings

    # What a type checker reads: the same fields, from doctune's own plug-ins' settings classes (a
    # separately installed plug-in's are added at run time only). tests/trainers/test_settings.py
    # checks, with mypy, that every setting of the run-time class is here.
    @dataclasses.dataclass(frozen=True)
    class TrialSettings(
        Hyperparameters,
        CropSettings,
        DecaSettings,
        DocSplitSettings,
        LaserSettings,
        SpanSettings,
        InfoNCESettings,
        BregmanSettings,
        AnchorSettings,
    ):
        """Everything a search may vary per trial."""

else:
    TrialSettings = dataclasses.make_dataclass(
        "TrialSettings",
        [  # Hyperparameters' own fields come with the base class
            (name, s.hint, dataclasses.field(default=s.field.default, metadata=s.field.metadata))
            for name, s in SETTINGS.items()
            if s.owners
        ],
        bases=(Hyperparameters,),
        frozen=True,
        namespace={"__post_init__": lambda self: _decide_recipe(self)},
    )
    TrialSettings.__module__ = __name__  # found here by reference when a trial's settings are pickled
    TrialSettings.__doc__ = (
        "Everything a search may vary per trial: ``Hyperparameters`` and every plug-in's own settings, "
        "by their names in a spec (``SETTINGS``)."
    )
