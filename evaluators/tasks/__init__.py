"""The task registry: every task is declared once, with its metadata, and found by name.

Built-in tasks are listed in ``TASKS``. Tasks over the user's own data are named by a prefix and
a location (``PARAMETRISED``): ``beir:<directory>`` (a BEIR-format collection),
``beir-hf:<dataset>`` (a BEIR collection in the Hugging Face layout, Hub id or local copy) and
``pairs:<directory>`` (linked document pairs). Adding a task is one class declaration and one
line here.
"""

from __future__ import annotations

from pathlib import Path

from evaluators.tasks.base import Task, TaskMetadata
from evaluators.tasks.clustering import R8Clustering
from evaluators.tasks.length import LengthRobustness
from evaluators.tasks.pairs import PAIR_FILES, LinkedPairsDirectory, NewsgroupsTopicPairs
from evaluators.tasks.probe import PROBES
from evaluators.tasks.retrieval import BEIR_FILES, BeirTask, HubBeirTask, NewsTitleRetrieval
from trainers.config import EvalBudget

TASKS: dict[str, type[Task]] = {
    cls.metadata.name: cls
    for cls in (NewsTitleRetrieval, *PROBES, R8Clustering, NewsgroupsTopicPairs, LengthRobustness)
}

# prefix -> (task class, files its directory must hold; None: not necessarily a local directory)
PARAMETRISED: dict[str, tuple[type[Task], tuple[str, ...] | None]] = {
    "beir:": (BeirTask, BEIR_FILES),
    "beir-hf:": (HubBeirTask, None),
    "pairs:": (LinkedPairsDirectory, PAIR_FILES),
}


class UnknownTask(KeyError):
    pass


def check_task_name(name: str) -> None:
    """Raise ``UnknownTask`` with a helpful message unless ``name`` names a task."""
    if name in TASKS:
        return
    for prefix, (_, required) in PARAMETRISED.items():
        if name.startswith(prefix):
            location = name[len(prefix) :]
            if not location:
                raise UnknownTask(f"task {name!r}: name a location after {prefix!r}")
            if required is not None:
                directory = Path(location).expanduser()
                missing = [p for p in required if not (directory / p).exists()]
                if missing:
                    raise UnknownTask(
                        f"task {name!r}: {directory} lacks {', '.join(missing)} (a {prefix[:-1]} directory holds "
                        f"{', '.join(required)})"
                    )
            return
    prefixes = ", ".join(f"{p}<location>" for p in PARAMETRISED)
    raise UnknownTask(f"unknown task {name!r}; known: {', '.join(sorted(TASKS))}, or {prefixes}")


def make_task(name: str, budget: EvalBudget) -> Task:
    check_task_name(name)
    for prefix, (cls, _) in PARAMETRISED.items():
        if name.startswith(prefix):
            return cls(budget, name[len(prefix) :])
    return TASKS[name](budget)


__all__ = ["PARAMETRISED", "TASKS", "Task", "TaskMetadata", "UnknownTask", "check_task_name", "make_task"]
