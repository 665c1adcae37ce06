"""The task registry: every task is a class declared once, with its metadata, and found by name.

Built-in tasks register under their metadata's name (``register_task``) in ``TASKS``. Tasks over
the user's own data are families named by a prefix and a location (``TASK_FAMILIES``):
``beir:<directory>`` (a BEIR-format collection), ``beir-hf:<dataset>`` (a BEIR collection in the
Hugging Face layout, Hub id or local copy) and ``pairs:<directory>`` (linked document pairs).
Every module of this package is imported, so adding a task is one module with one class
(docs/decisions.md, "Adding a recipe, a loss or a task").
"""

from __future__ import annotations

from core.registry import Registry, import_plugins
from evaluators.plan import EvalBudget
from evaluators.tasks.base import Task, TaskMetadata

TASKS: Registry[type[Task]] = Registry("task")
TASK_FAMILIES: Registry[type[Task]] = Registry("task family")  # by prefix, "beir:"


def register_task(cls: type[Task]) -> type[Task]:
    """Class decorator: the task, found by its metadata's name."""
    return TASKS.register(cls.metadata.name)(cls)


class UnknownTask(KeyError):
    pass


def check_task_name(name: str) -> None:
    """Raise ``UnknownTask`` with a helpful message unless ``name`` names a task."""
    if name in TASKS:
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
    for prefix in TASK_FAMILIES:
        if name.startswith(prefix):
            return TASK_FAMILIES[prefix](budget, name[len(prefix) :])
    return TASKS[name](budget)


import_plugins(__name__, __path__)

__all__ = [
    "TASKS",
    "TASK_FAMILIES",
    "Task",
    "TaskMetadata",
    "UnknownTask",
    "check_task_name",
    "make_task",
    "register_task",
]
