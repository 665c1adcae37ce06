"""The one way doctune finds its plug-ins (recipes, contrastive losses, evaluation tasks) by name.

A plug-in is a class in a module of its kind's package that registers itself::

    @RECIPES.register("docsplit")
    class DocSplit(Recipe): ...

and the package imports every module beside its ``__init__`` (``import_plugins``), so adding one
is adding its file. A separately installed package adds plug-ins through an entry point of the
kind's group (``doctune.recipes``, ``doctune.losses``, ``doctune.tasks``) naming a module that
registers them, as pytest finds its plug-ins: ``import_plugins`` loads every one. ``RECIPES["docsplit"]``
finds a plug-in; an unknown name raises ``KeyError`` listing the known ones. A kind with a default
(the recipe a spec that names none trains, the loss a recipe that names none trains with) has it
declared by the plug-in, ``register("docsplit", default=True)``, so no other module names it.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterator
from importlib.metadata import entry_points
from typing import Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """Plug-ins of one kind by name. ``plugins``: the package whose import registers them (it calls
    ``import_plugins``), imported on the first lookup, so a registry may be declared below the code
    that fills it (the spec declares the trackers' and needs no import of them)."""

    def __init__(self, kind: str, plugins: str | None = None) -> None:
        self.kind = kind  # for messages: "recipe", "contrastive loss", "task"
        self._entries: dict[str, T] = {}
        self._default: str | None = None
        self._plugins = plugins

    def _loaded(self) -> dict[str, T]:
        if self._plugins is not None:
            package, self._plugins = self._plugins, None  # set first: the package registers into this one
            try:
                importlib.import_module(package)
            except BaseException:
                self._plugins = package
                raise
        return self._entries

    def register(self, name: str, *, default: bool = False) -> Callable[[T], T]:
        """Register the decorated plug-in as ``name``; ``default``: the kind's default as well."""

        def add(entry: T) -> T:
            if name in self._entries:
                raise ValueError(f"{self.kind} {name!r} is registered twice: {self._entries[name]} and {entry}")
            if default and self._default is not None:
                raise ValueError(f"two default {self.kind}s: {self._default!r} and {name!r}")
            self._entries[name] = entry
            if default:
                self._default = name
            return entry

        return add

    @property
    def default(self) -> str:
        """The name of the plug-in registered as this kind's default."""
        self._loaded()
        if self._default is None:
            raise LookupError(f"no {self.kind} is registered as the default (register(name, default=True))")
        return self._default

    def __getitem__(self, name: str) -> T:
        if name not in self._loaded():
            raise KeyError(f"unknown {self.kind} {name!r}; known: {', '.join(self.names())}")
        return self._entries[name]

    def __contains__(self, name: object) -> bool:
        return name in self._loaded()

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def names(self) -> list[str]:
        return sorted(self._loaded())


class PluginFailed(ImportError):
    """An installed package's plug-in (an entry point) could not be loaded."""


def import_plugins(package: str, path: list[str], group: str) -> None:
    """Import every module of ``package`` (its ``__path__``), then every installed package's entry
    point in ``group``, so each registers its plug-ins."""
    for module in pkgutil.iter_modules(path):
        importlib.import_module(f"{package}.{module.name}")
    for point in entry_points(group=group):
        try:
            point.load()
        except Exception as err:
            where = f" (package {point.dist.name})" if point.dist is not None else ""
            raise PluginFailed(
                f"the {group} plug-in {point.name!r} = {point.value!r}{where} failed to load: "
                f"{type(err).__name__}: {err}; fix or uninstall that package"
            ) from err
