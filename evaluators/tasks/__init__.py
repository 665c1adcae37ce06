"""The task registry: every task is a class declared once, with its metadata, and found by name.

Built-in tasks register under their metadata's name (``register_task``) in ``TASKS``. Tasks over
the user's own data are families named by a prefix and a location (``TASK_FAMILIES``):
``beir:<directory>`` (a BEIR-format collection), ``beir-hf:<dataset>`` (a BEIR collection in the
Hugging Face layout, Hub id or local copy) and ``pairs:<directory>`` (linked document pairs).
Every module of this package is imported, so adding a task is one module with one class
(docs/plugins.md).

A task whose documents come in set lengths (``Task.length_grid``: needle, passkey) also has a grid
variant, its name plus ``@grid``: every length up to the long length, whatever the search scores
each round (``EvalBudget.haystacks``); a search scores it once, at its end.
"""

from __future__ import annotations

from dataclasses import replace

from doctune_core.registry import import_plugins
from evaluators.plan import EvalBudget
from evaluators.tasks.base import TASK_FAMILIES, TASKS, Task, TaskMetadata, register_task

GRID = "@grid"  # the suffix of a length-grid task's name


class UnknownTask(KeyError):
    pass


def grid_task(name: str) -> str:
    """The name of ``name``'s length grid (module docstring)."""
    return name + GRID


def task_class(name: str) -> type[Task]:
    """The class ``name`` (checked) makes."""
    check_task_name(name)
    if name.endswith(GRID):
        return task_class(name[: -len(GRID)])
    family = next((prefix for prefix in TASK_FAMILIES if name.startswith(prefix)), None)
    return TASK_FAMILIES[family] if family else TASKS[name]


def check_task_name(name: str) -> None:
    """Raise ``UnknownTask`` with a helpful message unless ``name`` names a task."""
    if name in TASKS:
        return
    if name.endswith(GRID):
        scored = name[: -len(GRID)]
        if not task_class(scored).length_grid:
            raise UnknownTask(f"task {name!r}: {scored!r} has no documents of set lengths, so no {GRID} variant")
        return
    for prefix in TASK_FAMILIES:
        if name.startswith(prefix):
            location = name[len(prefix) :]
            if not location:
                raise UnknownTask(f"task {name!r}: name a location after {prefix!r}")
            problem = TASK_FAMILIES[prefix].location_problem(name, location)
            if problem:
                raise UnknownTask(problem)
            return
    prefixes = ", ".join(f"{p}<location>" for p in TASK_FAMILIES)
    raise UnknownTask(f"unknown task {name!r}; known: {', '.join(TASKS)}, or {prefixes}")


def make_task(name: str, budget: EvalBudget) -> Task:
    check_task_name(name)
    if name.endswith(GRID):
        return make_task(name[: -len(GRID)], replace(budget, haystacks="grid"))
    for prefix in TASK_FAMILIES:
        if name.startswith(prefix):
            return TASK_FAMILIES[prefix](budget, name[len(prefix) :])
    return TASKS[name](budget)


import_plugins(__name__, __path__, "doctune.tasks")

__all__ = [
    "GRID",
    "TASKS",
    "TASK_FAMILIES",
    "Task",
    "TaskMetadata",
    "UnknownTask",
    "check_task_name",
    "grid_task",
    "make_task",
    "register_task",
    "task_class",
]
