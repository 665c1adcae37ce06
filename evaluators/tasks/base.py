"""What every evaluation task is: metadata, data loaded once, and a score from an embedder."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np

from trainers.config import EvalBudget

Embedder = Callable[[list[str]], np.ndarray]  # texts -> (n, d) L2-normalised embeddings


@dataclass(frozen=True)
class TaskMetadata:
    name: str
    type: Literal["retrieval", "probe", "clustering", "pairs", "length"]
    description: str
    source: str
    split: str
    main_score: str
    license: str = "see source"
    # texts longer than the evaluation's max_length: truncated, or cut into windows whose pooled
    # vectors are averaged (trainers.encoder.embed_texts); the share affected is reported
    long_inputs: Literal["truncate", "chunk"] = "truncate"


class Task(ABC):
    metadata: TaskMetadata

    def __init__(self, budget: EvalBudget) -> None:
        self.budget = budget

    @abstractmethod
    def load(self) -> None:
        """Read the task's data (called once per evaluator actor)."""

    @abstractmethod
    def evaluate(self, embed: Embedder) -> dict[str, float]:
        """Scores for one encoder; the returned dict holds ``main`` (the main score) too."""
