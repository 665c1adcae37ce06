"""What a round says of its training, beside its scores: each loss term's mean over the round's steps,
the tokens per second and the steps' time (``RoundWindow``), the GPU memory's high-water mark, and
what its checkpoint records of itself (``doctune.json``)."""

from __future__ import annotations

import dataclasses

import torch

from trainers.config import Hyperparameters, TrainPlan
from trainers.distributed import world_size
from trainers.memory import MIB


class RoundWindow:
    """The steps of the round under way: each loss term's values (and each step's, ``steps``), the
    tokens read, the steps' time."""

    def __init__(self) -> None:
        self.terms: dict[str, list[float]] = {}
        self.steps: list[dict] = []
        self.tokens, self.seconds = 0, 0.0

    def add(self, step: int, terms: dict[str, float], tokens: int, seconds: float) -> None:
        self.steps.append({"step": step, **terms})
        for name, value in terms.items():
            self.terms.setdefault(name, []).append(value)
        self.tokens += tokens
        self.seconds += seconds

    def metrics(self) -> dict[str, float]:
        """Each loss term's mean over the round, the tokens per second (every rank's tokens over
        rank 0's time) and the steps' time itself."""
        return {
            **{name: sum(values) / len(values) for name, values in self.terms.items()},
            "tokens_per_s": self.tokens * world_size() / max(self.seconds, 1e-9),
            "train_seconds": self.seconds,  # this round's training steps (rank 0's clock)
        }


def checkpoint_record(plan: TrainPlan, hp: Hyperparameters, trial_id: str, step: int) -> dict:
    """What a checkpoint says about itself (doctune.json)."""
    return {
        "recipe": hp.recipe,
        "hyperparameters": dataclasses.asdict(hp),
        "base_model": plan.base_model_name,
        "corpus": plan.corpus_name,
        "max_length": plan.max_length,
        "pooling": hp.pooling,
        "step": step,
        "trial_id": trial_id,
    }


def peak_gpu_memory(device: torch.device) -> dict[str, float]:
    """The round's GPU memory high-water mark (allocator, MiB), reset for the next round; on the
    CPU nothing (the resident set is the process's, not the step's)."""
    if device.type != "cuda":
        return {}
    peak = torch.cuda.max_memory_allocated(device) / MIB
    torch.cuda.reset_peak_memory_stats(device)
    return {"gpu_peak_mib": peak}
