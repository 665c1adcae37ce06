"""The task registry: every task is declared once, with its metadata, and found by name.

Built-in tasks are listed in ``TASKS``; any BEIR-format directory is a task named
``beir:<path>``. Adding a task is one class declaration and one line here.
"""

from __future__ import annotations

from evaluators.tasks.base import Task, TaskMetadata
from evaluators.tasks.clustering import R8Clustering
from evaluators.tasks.length import LengthRobustness
from evaluators.tasks.probe import R8FewShot, R52FewShot, TwentyNewsgroupsFewShot
from evaluators.tasks.retrieval import BeirTask, NewsTitleRetrieval
from trainers.config import EvalBudget

TASKS: dict[str, type[Task]] = {
    cls.metadata.name: cls
    for cls in (NewsTitleRetrieval, R8FewShot, R52FewShot, TwentyNewsgroupsFewShot, R8Clustering, LengthRobustness)
}


class UnknownTask(KeyError):
    pass


def check_task_name(name: str) -> None:
    """Raise ``UnknownTask`` with a helpful message unless ``name`` names a task."""
    if name in TASKS:
        return
    if name.startswith("beir:"):
        from pathlib import Path

        directory = Path(name[5:]).expanduser()
        missing = [p for p in ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv") if not (directory / p).exists()]
        if missing:
            raise UnknownTask(f"task {name!r}: {directory} is not a BEIR directory (missing {', '.join(missing)})")
        return
    raise UnknownTask(f"unknown task {name!r}; known: {', '.join(sorted(TASKS))}, or beir:<directory>")


def make_task(name: str, budget: EvalBudget) -> Task:
    check_task_name(name)
    if name.startswith("beir:"):
        return BeirTask(budget, name[5:])
    return TASKS[name](budget)


__all__ = ["TASKS", "Task", "TaskMetadata", "UnknownTask", "check_task_name", "make_task"]
