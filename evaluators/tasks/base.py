"""What every evaluation task is: metadata, data loaded once, and scores from an embedder.

Every task has two parts that never overlap: ``val`` (validation), the only part that steers a
search (objective, ASHA, Optuna, each trial's best round, ``best/``), and ``test``, the part the
leaderboard and reports show for the chosen checkpoints. How a task makes its validation part is
its ``metadata.split``.
"""

from __future__ import annotations

import math
import weakref
import zlib
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal

import numpy as np

from doctune_core.outcomes import Outcomes
from doctune_core.registry import Registry
from evaluators.plan import EvalBudget

Embedder = Callable[[list[str]], np.ndarray]  # texts -> (n, d) L2-normalised embeddings
Split = Literal["val", "test"]
SPLITS: tuple[Split, ...] = ("val", "test")
SPLIT_SEED = 20261123  # seeds every validation/test partition, so all runs and machines agree


@dataclass(frozen=True)
class TaskMetadata:
    name: str
    type: Literal["retrieval", "probe", "clustering", "pairs", "length"]
    description: str
    source: str
    split: str  # how the validation and test parts are made
    main_score: str
    license: str = "see source"
    # texts longer than the evaluation's max_length: truncated, or cut into windows whose pooled
    # vectors are averaged (doctune_core.encoder.embed_texts); the share affected is reported
    long_inputs: Literal["truncate", "chunk"] = "truncate"
    # a long-document task is embedded at the evaluation's long length (``EvalBudget.long_length``),
    # every other task at its max_length (``EvalPlan.scoring_length``)
    long_documents: bool = False


class PerEncoder:
    """One value computed per encoder (per embedder), such as the probe classifiers that both parts
    share, remembered without keeping the encoder alive."""

    def __init__(self) -> None:
        self._embedder: weakref.ref | None = None
        self._value = None

    def get(self, embed: Embedder, make: Callable[[], object]):
        if self._embedder is None or self._embedder() is not embed:
            self._value, self._embedder = make(), weakref.ref(embed)
        return self._value


def mean_pairwise_cosine(vectors: np.ndarray) -> float:
    """The mean cosine between any two of ``vectors`` (``(n, d)``, L2-normalised), each pair once: how
    alike an encoder makes a collection's documents look. A gain that only spreads documents apart
    lowers it without reading them better (de-collapse, arXiv 2410.24200)."""
    n = len(vectors)
    if n < 2:
        return float("nan")
    total = vectors.sum(axis=0)
    return float((total @ total - np.einsum("ij,ij->", vectors, vectors)) / (n * (n - 1)))


Z_LEVEL = 1.959964  # two-sided 5%
Z_POWER = 0.841621  # 80% power


@dataclass(frozen=True)
class PartSizeReference:
    """One task type's measured noise per item (``sigma``) and typical difference between two trials of
    a search, declared on the task it was measured on (``Task.part_size_reference``): the part-size
    warning (``evaluators.part_sizes``) checks every task of that type against it."""

    sigma: float
    typical_difference: float

    @property
    def min_items(self) -> int:
        """The items a part needs to find a typical difference beyond noise (a paired two-sided test at
        5%) with 80% probability."""
        return math.ceil(((Z_LEVEL + Z_POWER) * self.sigma / self.typical_difference) ** 2)


class Task(ABC):
    metadata: TaskMetadata
    # a family of tasks over a location (``beir:<directory>``): the files its directory must hold
    # (None: the location need not be a local directory)
    required_files: tuple[str, ...] | None = None
    # whose documents come in set lengths (``EvalBudget.haystacks``): it has a ``@grid`` variant
    length_grid: bool = False
    # the noise per item and typical difference between trials that the part-size warning checks every
    # task of this one's type against, on the task they were measured on (``evaluators.part_sizes``)
    part_size_reference: ClassVar[PartSizeReference | None] = None

    @classmethod
    def location_problem(cls, name: str, location: str) -> str | None:
        """What is wrong with a family member's location, before any data is read (None: nothing):
        by default, the files ``required_files`` names missing from its directory."""
        if cls.required_files is None:
            return None
        directory = Path(location).expanduser()
        missing = [p for p in cls.required_files if not (directory / p).exists()]
        if missing:
            prefix = name[: -len(location)]
            return (
                f"task {name!r}: {directory} lacks {', '.join(missing)} (a {prefix[:-1]} directory holds "
                f"{', '.join(cls.required_files)})"
            )
        return None

    def __init__(self, budget: EvalBudget) -> None:
        self.budget = budget
        # what each part scores of what the collection holds, by unit ("documents", "queries"):
        # (scored, total), set by ``load`` where the budget can cut a part
        self.sizes: dict[Split, dict[str, tuple[int, int]]] = {}
        self._part_digests: dict[Split, float] = {}  # part_digest's, once per part

    @abstractmethod
    def load(self) -> None:
        """Read the task's data and make its validation and test parts (once per evaluator actor)."""

    def item_count(self, split: Split) -> int | None:
        """How many items (queries, documents) one part scores, known once loaded; None for a task
        whose noise no reference measures (``evaluators.part_sizes``)."""
        return None

    def document_texts(self) -> list[str]:
        """The documents both parts score, once loaded (what the dry run's length table counts);
        empty for a task whose items are not documents."""
        return []

    def short_texts(self, split: Split) -> list[str]:
        """The texts of one part that fit the base's window (queries, short documents), once loaded:
        what ``Evaluator.start_cosine`` compares a trained encoder's embeddings of with its start's.
        Empty for a task of long documents."""
        return []

    @abstractmethod
    def outcomes(self, embed: Embedder, split: Split) -> Outcomes:
        """One encoder's item-level results on one part; ``scores`` hold ``main`` (the main score)."""

    def evaluate(self, embed: Embedder, parts: tuple[Split, ...] = SPLITS) -> dict[str, dict[str, float]]:
        """Each part's scores (both by default: ``{"val": {...}, "test": {...}}``), each with ``main``,
        ``main_se``, its digest and, where the budget can cut the part, its sizes (``part_sizes``)."""
        return {split: {**self.outcomes(embed, split).summary(), **self.part_sizes(split)} for split in parts}

    def part_sizes(self, split: Split) -> dict[str, float]:
        """``{unit: scored, f"{unit}_total": the collection's}`` for one part (``evaluators.scores.coverage``),
        and its ``part_digest``: a checksum of everything the part holds (texts, labels, judgments),
        so any file of scores says which items they were scored on (tests/bench/test_locked_parts.py)."""
        sizes: dict[str, float] = {"part_digest": self.part_digest(split)}
        for unit, (scored, total) in self.sizes.get(split, {}).items():
            sizes |= {unit: float(scored), f"{unit}_total": float(total)}
        return sizes

    def part_digest(self, split: Split) -> float:
        """CRC-32 of the loaded part's content (``self.parts[split]``, as every task keeps it), as a number."""
        if split not in self._part_digests:
            self._part_digests[split] = float(zlib.crc32(repr(self.parts[split]).encode()))
        return self._part_digests[split]

    def check_parts(self, sizes: dict[Split, int]) -> None:
        """Refuse, with the reason, a part with nothing to score (data too small to split)."""
        for split, size in sizes.items():
            if size == 0:
                raise ValueError(
                    f"task {self.metadata.name}: its {split} part is empty ({self.metadata.split}); "
                    "the data is too small to give both parts"
                )


def held_out_indices(labels: list, size: int, seed: int = SPLIT_SEED) -> list[int]:
    """About ``size`` indices drawn per class in proportion to its share, never a class's last
    example (so every class keeps a training example), in ascending order: a stratified
    validation part taken out of a training split."""
    by_class: dict = {}
    for i, label in enumerate(labels):
        by_class.setdefault(label, []).append(i)
    rng = np.random.default_rng(seed)
    chosen: list[int] = []
    for _, members in sorted(by_class.items(), key=lambda item: str(item[0])):
        quota = min(len(members) - 1, round(size * len(members) / len(labels)))
        if quota > 0:
            chosen.extend(rng.choice(members, size=quota, replace=False).tolist())
    return sorted(chosen)


def validation_size(train: int, test: int) -> int:
    """How many training examples a probe-like task holds out for validation: as many as its
    test part scores, at most a fifth of the training split."""
    return min(test, train // 5)


# the registries every task module joins (``evaluators.tasks`` imports them all and finds tasks by name)
TASKS: Registry[type[Task]] = Registry("task")
TASK_FAMILIES: Registry[type[Task]] = Registry("task family")  # by prefix, "beir:"


def register_task(cls: type[Task]) -> type[Task]:
    """Class decorator: the task, found by its metadata's name."""
    return TASKS.register(cls.metadata.name)(cls)
