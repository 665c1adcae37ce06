"""What every evaluation task is: metadata, data loaded once, and scores from an embedder.

Every task has two parts that never overlap: ``val`` (validation), the only part that steers a
search (objective, ASHA, Optuna, each trial's best round, ``best/``), and ``test``, the part the
leaderboard and reports show for the chosen checkpoints. How a task makes its validation part is
its ``metadata.split``.
"""

from __future__ import annotations

import weakref
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from evaluators.plan import EvalBudget

Embedder = Callable[[list[str]], np.ndarray]  # texts -> (n, d) L2-normalised embeddings
Split = Literal["val", "test"]
SPLITS: tuple[Split, ...] = ("val", "test")
BOOTSTRAP_ROUNDS = 200  # resamples behind a bootstrap standard error
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
    # vectors are averaged (core.encoder.embed_texts); the share affected is reported
    long_inputs: Literal["truncate", "chunk"] = "truncate"


@dataclass
class Outcomes:
    """One encoder's results on one part of a task, item by item, so that any score can carry its
    noise and two encoders can be compared on the same items (``evaluators.noise``).

    ``items`` has one row per scored item (a query, a test document, a pair); ``statistic`` maps
    any selection of rows (a bootstrap resample) to the main score, so ``statistic(items)`` is the
    main score itself. ``draws`` holds the main score of each probe draw where the task fits one
    classifier per seeded draw: their spread is then the standard error (over the draws).
    """

    scores: dict[str, float]
    items: np.ndarray
    statistic: Callable[[np.ndarray], float]
    draws: np.ndarray | None = field(default=None)

    def standard_error(self, rounds: int = BOOTSTRAP_ROUNDS, seed: int = 0) -> float:
        """Over the draws when there are several (probes); else a bootstrap over the items."""
        if self.draws is not None and len(self.draws) > 1:
            return float(np.std(self.draws, ddof=1) / np.sqrt(len(self.draws)))
        n = len(self.items)
        if n < 2:
            return float("nan")
        rng = np.random.default_rng(seed)
        values = [self.statistic(self.items[rng.integers(0, n, n)]) for _ in range(rounds)]
        return float(np.std(values, ddof=1))

    def summary(self) -> dict[str, float]:
        """The scores with ``main_se`` (the main score's standard error) and ``n`` (items scored)."""
        return {**self.scores, "main_se": self.standard_error(), "n": float(len(self.items))}


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


def mean_of_rows(items: np.ndarray) -> float:
    """The statistic of tasks whose main score is a mean over items (nDCG over queries, accuracy)."""
    return float(np.mean(items))


class Task(ABC):
    metadata: TaskMetadata
    # a family of tasks over a location (``beir:<directory>``): the files its directory must hold
    # (None: the location need not be a local directory)
    required_files: tuple[str, ...] | None = None

    def __init__(self, budget: EvalBudget) -> None:
        self.budget = budget

    @abstractmethod
    def load(self) -> None:
        """Read the task's data and make its validation and test parts (once per evaluator actor)."""

    @abstractmethod
    def outcomes(self, embed: Embedder, split: Split) -> Outcomes:
        """One encoder's item-level results on one part; ``scores`` hold ``main`` (the main score)."""

    def evaluate(self, embed: Embedder) -> dict[str, dict[str, float]]:
        """Both parts' scores: ``{"val": {...}, "test": {...}}``, each with ``main`` and ``main_se``."""
        return {split: self.outcomes(embed, split).summary() for split in SPLITS}

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
