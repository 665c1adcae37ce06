"""What an evaluation runs: the tasks and how their scores combine into the search's objectives
(``EvalPlan``), and how much of each task's data it uses (``EvalBudget``). Built by the driver from
the spec's ``evaluation`` and ``search.objective``; read by the pool, the tasks and the reports."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from doctune_core.fields import constraint

ProbeHead = Literal["logistic", "mlp"]


@dataclass(frozen=True)
class EvalBudget:
    """How much of each task's data an evaluation uses (the smoke and local profiles shrink it), and
    the probe tasks' classifier."""

    max_documents: int | None = field(
        default=None,
        metadata=constraint("retrieval corpus size (every judged document of a kept query stays)", 1),
    )
    max_queries: int | None = field(default=None, metadata=constraint("retrieval queries (the first, by id)", 1))
    max_test: int | None = field(default=None, metadata=constraint("probe test examples (stratified subsample)", 1))
    fewshot_k: int = field(default=8, metadata=constraint("probe training examples per class", 1))
    repeats: int = field(default=5, metadata=constraint("few-shot draws, each with its own seed", 1))
    max_train: int | None = field(
        default=None, metadata=constraint("full-probe training examples (stratified subsample)", 1)
    )
    long_length: int = field(
        default=4096,
        metadata=constraint(
            "tokens a long-document task's documents reach and are embedded at (the needle and passkey haystacks' "
            "longest length); other tasks use evaluation.max_length",
            8,
        ),
    )
    haystacks: Literal["grid", "longest"] = field(
        default="grid",
        metadata=constraint(
            "the needle and passkey haystack lengths a round scores: grid (every LongEmbed length up to long_length) "
            "or longest (long_length alone; a search then scores the whole grid once, at its end, for the winner, "
            "the baselines and the reference rows)"
        ),
    )
    long_queries: int = field(
        default=50,
        metadata=constraint(
            "needle and passkey queries per haystack length (spread over the depths); each length's pool holds twice "
            "as many haystacks (LongEmbed's 50 queries against 100)",
            3,
        ),
    )
    probe_head: ProbeHead = field(
        default="logistic",
        metadata=constraint("probe classifier on frozen embeddings: logistic (linear) or mlp (one hidden layer)"),
    )


@dataclass(frozen=True)
class EvalPlan:
    """Which tasks score a checkpoint, how they combine, and where the evaluator actors live."""

    # objective name -> (task name -> weight); each objective is the weighted mean of its tasks'
    # main scores. A single-objective search has one, named "objective"; the first one ranks.
    objectives: dict[str, dict[str, float]]
    actor_names: tuple[str, ...]
    namespace: str
    budget: EvalBudget
    max_length: int
    batch_size: int
    threads: int
    report_tasks: tuple[str, ...] = ()
    # where the embeddings of a model outside the run directory (the base a search starts from)
    # are kept for every run to find; None: in the run directory, like a checkpoint's
    shared_embeddings: str | None = None
    references: bool = True  # score the reference rows (evaluators.references) and compare the winner with them
    # the parts scored: a search scores both; a benchmark scores validation only, so that no
    # benchmark file ever holds a score on a locked test part (tests/bench/test_locked_parts.py)
    parts: tuple[Literal["val", "test"], ...] = ("val", "test")
    bf16: bool = False  # embed under bf16 autocast where the device computes bf16 (evaluation.bf16)

    @property
    def tasks(self) -> tuple[str, ...]:
        """Every task some objective uses, in spec order."""
        return tuple(dict.fromkeys(task for weights in self.objectives.values() for task in weights))

    def scoring_length(self, long_documents: bool) -> int:
        """The tokens per text a task is embedded at: the long length for a long-document task
        (``TaskMetadata.long_documents``), ``max_length`` for any other (a model with fewer
        positions embeds at its own: ``doctune_core.encoder.embedding_length``)."""
        return self.budget.long_length if long_documents else self.max_length

    @property
    def multi_objective(self) -> bool:
        return len(self.objectives) > 1

    def objective_values(self, main_scores: dict[str, float]) -> dict[str, float]:
        """Every objective's value; each of its tasks must have a score."""
        values = self.covered_objective_values(main_scores)
        if len(values) < len(self.objectives):
            missing = sorted({t for w in self.objectives.values() for t in w} - set(main_scores))
            raise KeyError(f"no score for {', '.join(missing)}")
        return values

    def covered_objective_values(self, main_scores: dict[str, float]) -> dict[str, float]:
        """``objective_values`` of the objectives whose every task has a score (a reference row
        such as BM25 scores the retrieval tasks only)."""
        return {
            name: sum(w * main_scores[task] for task, w in weights.items()) / sum(weights.values())
            for name, weights in self.objectives.items()
            if all(task in main_scores for task in weights)
        }

    def objective_of(self, main_scores: dict[str, float]) -> float:
        """The first (ranking) objective."""
        return next(iter(self.objective_values(main_scores).values()))

    @property
    def objective_metrics(self) -> tuple[str, ...]:
        """The reported metric of each objective: ``objective`` for the only one, else ``objective/<name>``."""
        if not self.multi_objective:
            return ("objective",)
        return tuple(f"objective/{name}" for name in self.objectives)

    def reported_objectives(self, main_scores: dict[str, float]) -> dict[str, float]:
        """``objective`` (the first) and, for several, each as ``objective/<name>``: what a trial reports."""
        values = self.objective_values(main_scores)
        return {"objective": next(iter(values.values())), **dict(zip(self.objective_metrics, values.values()))}
