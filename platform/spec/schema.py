"""The spec's schema: every section of a search spec as a typed, frozen dataclass. Field metadata
(``doctune_core.fields.constraint``) holds each key's help line and valid range; ``platform.spec.convert``
checks a YAML mapping against these types."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from doctune_core.fields import constraint
from evaluators.plan import EvalBudget
from platform.spec.study import StudySection
from trainers.config import BaseSettings, MlmHeadSettings
from trainers.settings import TrialSettings


class SpecError(ValueError):
    """The spec is invalid; the message names the key and the fix."""


@dataclass(frozen=True)
class Distribution:
    """One searched dimension: ``{uniform: [lo, hi]}``, ``{loguniform: [lo, hi]}``,
    ``{int: [lo, hi]}`` (inclusive) or ``{choice: [v1, v2, ...]}``, optionally with
    ``when: {other: value-or-list}``: the dimension is sampled only in trials where every named
    earlier dimension took one of the listed values (no wasted dimensions)."""

    kind: Literal["uniform", "loguniform", "int", "choice"] = field(
        metadata=constraint("written as the key: {uniform: [lo, hi]}, {loguniform: ...}, {int: ...}, {choice: ...}")
    )
    values: tuple = field(metadata=constraint("[lo, hi] for a range (int: inclusive), the options for a choice"))
    when: tuple[tuple[str, tuple], ...] = field(
        default=(),
        metadata=constraint(
            "{earlier dimension: value or [values]}: drawn only in trials where each named earlier choice took "
            "one of them (e.g. split_probability when views is split or split+elongation)"
        ),
    )

    def applies(self, chosen: dict) -> bool:
        return all(name in chosen and chosen[name] in allowed for name, allowed in self.when)


@dataclass(frozen=True)
class CorpusSpec:
    source: str = field(
        default="news-articles",
        metadata=constraint(
            "'news-articles' (packaged), a .jsonl/.txt/.parquet file or a directory of them (a .txt file there is "
            "one document), the same in a bucket (s3://bucket/prefix, gs://..., read by every node from there), "
            "or hf:<dataset id>[:<split>] (streamed)"
        ),
    )
    max_documents: int | None = field(
        default=None,
        metadata=constraint(
            "use the source's first this many documents (empty ones dropped, so a few fewer may remain)", 1
        ),
    )


@dataclass(frozen=True)
class LongformerSpec:
    max_length: int = field(default=4096, metadata=constraint("positions of the converted model", 16, 65536))
    attention_window: int = field(default=256, metadata=constraint("sliding window (even), per layer", 2, 65536))


@dataclass(frozen=True)
class BackboneSpec:
    longformer: LongformerSpec | None = field(
        default=None,
        metadata=constraint(
            "convert base_model into a Longformer (position embeddings copied out, global Q/K/V from local)"
        ),
    )


@dataclass(frozen=True)
class ObjectiveSpec:
    tasks: dict[str, float] = field(
        default_factory=dict,
        metadata=constraint("task name -> weight: one objective, the weighted mean of the tasks' main scores"),
    )
    objectives: dict[str, dict[str, float]] = field(
        default_factory=dict,
        metadata=constraint(
            "instead of tasks: several named objectives (each task name -> weight), searched with NSGA-II "
            "for their Pareto front; the first ranks the leaderboard and picks best/"
        ),
    )

    def named(self) -> dict[str, dict[str, float]]:
        """Every objective by name (a single one is called ``objective``)."""
        return {name: dict(tasks) for name, tasks in self.objectives.items()} or {"objective": dict(self.tasks)}


@dataclass(frozen=True)
class AshaSpec:
    grace_period: int = field(default=1, metadata=constraint("evaluation rounds before a trial can be stopped", 1))
    reduction_factor: int = field(default=2, metadata=constraint("ASHA's halving rate", 2))


@dataclass(frozen=True)
class PbtSpec:
    method: Literal["pbt", "pb2"] = field(
        default="pbt",
        metadata=constraint(
            "pbt: new values by random perturbation (Jaderberg et al. 2017); pb2: by a GP bandit over the "
            "numeric perturbed dimensions, within their ranges (Parker-Holder et al. 2020; choices stay the donor's)"
        ),
    )
    perturbation_interval: int = field(
        default=1, metadata=constraint("evaluation rounds between two exploits (every trial reaches each first)", 1)
    )
    quantile_fraction: float = field(
        default=0.25,
        metadata=constraint(
            "the bottom share of trials that copy a checkpoint from the top share", 0.0, 0.5, low_open=True
        ),
    )
    resample_probability: float = field(
        default=0.25,
        metadata=constraint(
            "pbt: chance that an exploiting trial draws a value anew from the space instead of perturbing the "
            "donor's (x0.8 or x1.2 within the searched range, or a neighbouring choice)",
            0.0,
            1.0,
        ),
    )


@dataclass(frozen=True)
class SchedulerSpec:
    asha: AshaSpec | None = field(default_factory=AshaSpec, metadata=constraint("null to run every trial to the end"))
    pbt: PbtSpec | None = field(
        default=None,
        metadata=constraint(
            "Population Based Training instead of Optuna and ASHA: the population is drawn at random from the "
            "space (warm starts first); every perturbation_interval rounds the bottom quantile continues from a "
            "top trial's checkpoint with its searched lr, temperature, mlm_weight, bregman_weight perturbed"
        ),
    )


@dataclass(frozen=True)
class SearchSection:
    objective: ObjectiveSpec = field(metadata=constraint("what the search maximises"))
    samples: int = field(default=16, metadata=constraint("number of trials", 1))
    sampler: Literal["tpe", "random", "grid"] = field(
        default="tpe",
        metadata=constraint(
            "tpe (random start-up of a quarter of the samples, at least 2, at most 10; then model-guided), random, "
            "or grid (every choice x grid_points values per numeric range); several objectives always use NSGA-II"
        ),
    )
    seed: int = field(default=0, metadata=constraint("seed of the sampler"))
    multivariate: bool = field(
        default=True, metadata=constraint("tpe: model the dimensions jointly (false: one density per dimension)")
    )
    grid_points: int = field(
        default=3, metadata=constraint("grid: values per numeric range (geometric for loguniform)", 2)
    )
    confirm_seeds: int = field(
        default=0,
        metadata=constraint(
            "after the search, train the winner's configuration with this many new seeds (that many whole trials "
            "more) and report their test objective's mean +- std (the winner's own run apart: chosen as the best, it "
            "is biased upwards); 2 or more put the seeds' noise into every gain's interval, and the gains over the "
            "baseline rows become the new runs' mean",
            0,
        ),
    )
    scheduler: SchedulerSpec = field(default_factory=SchedulerSpec, metadata=constraint("early stopping"))
    space: dict[str, Distribution] = field(default_factory=dict, metadata=constraint("searched hyperparameters"))
    max_concurrent: int | None = field(default=None, metadata=constraint("cap on trials at once", 1))
    warm_start: list[dict[str, Any]] = field(
        default_factory=list,
        metadata=constraint("configurations the first trials run (searched name -> value), e.g. papers' defaults"),
    )


@dataclass(frozen=True)
class TrainSection:
    steps: int = field(default=2000, metadata=constraint("optimizer steps per trial", 1))
    eval_every: int = field(default=250, metadata=constraint("steps between checkpoints (each is scored)", 1))
    batch_size: int = field(default=36, metadata=constraint("pairs per step across all workers (unless searched)", 1))
    max_length: int = field(default=512, metadata=constraint("tokens per view", 8))
    workers: int | Literal["auto"] = field(
        default=2,
        metadata=constraint(
            "data-parallel workers per trial; auto: one per GPU of the cluster's largest node, as many as split "
            "every batch size evenly (the global batch and its in-batch negatives stay the same)",
            1,
        ),
    )
    cpus_per_worker: float = field(default=4.0, metadata=constraint("CPUs each worker holds", 0.0, low_open=True))
    gpus_per_worker: float = field(default=1.0, metadata=constraint("GPUs each worker holds (0: CPU training)", 0.0))
    bf16: bool = field(default=True, metadata=constraint("bf16 autocast on a GPU or a CPU with AVX512-BF16"))
    seed: int = field(default=0, metadata=constraint("training seed"))
    max_worker_failures: int = field(default=2, metadata=constraint("worker-group restarts per trial", 0))
    max_trial_failures: int = field(
        default=2,
        metadata=constraint(
            "times Tune restarts a trial lost past its worker-group restarts (a reclaimed node, its Train controller "
            "lost); the restart goes on from the trial's latest checkpoint",
            0,
        ),
    )
    gradient_checkpointing: bool = field(
        default=False,
        metadata=constraint("recompute activations in backward (less memory, about a third more compute)"),
    )
    chunk_size: int | Literal["auto"] | None = field(
        default=None,
        metadata=constraint(
            "cached contrastive loss (GradCache): encode at most this many sequences at once; exact gradients, "
            "memory bounded by the chunk, not the batch; auto: each worker measures the largest chunk that fits",
            1,
        ),
    )
    overlap_scoring: bool = field(
        default=True,
        metadata=constraint(
            "train on while the evaluators score a round (its scores reach the search at the first step after they "
            "arrive, rounds in order); false: training waits for each round's scores"
        ),
    )
    keep_checkpoints: Literal["best", "all"] = field(
        default="best",
        metadata=constraint(
            "what an ended trial keeps: best (the weights of the round its leaderboard row shows, so every row "
            "and the Pareto front stay exportable; the other rounds keep their scores) or all (every round's "
            "weights); training state stays only where a resume can need it"
        ),
    )


@dataclass(frozen=True)
class EvaluationSection:
    evaluators: int = field(default=2, metadata=constraint("evaluator actors", 1))
    cpus_per_evaluator: float | Literal["auto"] = field(
        default=2.0,
        metadata=constraint(
            "CPUs each evaluator holds; auto: what one trial leaves of the cluster's CPUs, split between the "
            "evaluators in whole CPUs, 1 to 4 each (their threads at most that)",
            0.0,
            low_open=True,
        ),
    )
    gpus_per_evaluator: float | Literal["auto"] = field(
        default="auto",
        metadata=constraint(
            "GPUs each evaluator holds; auto: none on a cluster without GPUs, else an eighth of one each (a "
            "quarter between them at most), whole-GPU workers then holding the rest of theirs",
            0.0,
        ),
    )
    threads: int = field(default=2, metadata=constraint("torch threads per evaluator", 1))
    max_length: int = field(default=512, metadata=constraint("tokens per text when embedding", 8))
    batch_size: int = field(default=32, metadata=constraint("texts per embedding batch", 1))
    bf16: bool = field(
        default=False,
        metadata=constraint(
            "embed under bf16 autocast where the device computes bf16 (a GPU; a CPU with AVX512-BF16), fp32 "
            "elsewhere; every row of a run is embedded alike"
        ),
    )
    limits: EvalBudget = field(default_factory=EvalBudget, metadata=constraint("how much task data to use"))
    report_tasks: list[str] = field(default_factory=list, metadata=constraint("scored for the report, never steer"))
    references: bool = field(
        default=True,
        metadata=constraint(
            "score the reference rows once per run (BM25, the base as its users run it, truncated and windowed; "
            "evaluators/references.py) and place the winner against them; never steer"
        ),
    )
    locked_part: bool = field(
        default=True,
        metadata=constraint(
            "read the locked test parts once the search has chosen (the winner, baselines and references) and "
            "print the test verdicts, each reading recorded in the ledger beside the cache (evaluators/readings.py); "
            "false: validation only, no locked part read and no test verdict (what a benchmark runs; "
            "--validation-only sets it)"
        ),
    )


class TrackerSettings(dict):
    """``tracking:``, each key a tracker's registered name (``platform.tracking.trackers``), its value
    that tracker's own settings, built into the settings class the tracker declares (``null``: off)."""


@dataclass(frozen=True)
class SearchSpec:
    name: str = field(metadata=constraint("the search's name (run directory, Tune experiment)"))
    search: SearchSection = field(metadata=constraint("objective, sampler, scheduler and search space"))
    base_model: str = field(
        default="all-minilm-l6-v2",
        metadata=constraint(
            "packaged alias, local model directory, or Hugging Face id; with base: set, the trained base's label"
        ),
    )
    base: BaseSettings | None = field(
        default=None,
        metadata=constraint(
            "instead of base_model: train a vanilla (MLM-only) BERT and its WordPiece vocabulary from scratch on "
            "the corpus before the search, cached by corpus content and settings; the local and smoke profiles "
            "shrink it"
        ),
    )
    backbone: BackboneSpec = field(default_factory=BackboneSpec, metadata=constraint("encoder architecture changes"))
    corpus: CorpusSpec = field(default_factory=CorpusSpec, metadata=constraint("pretraining text"))
    recipe: str | None = field(
        default=None, metadata=constraint("positive-pair recipe, unless searched (unset: the default recipe)")
    )
    hyperparameters: dict[str, Any] = field(
        default_factory=dict, metadata=constraint("fixed values for hyperparameters that are not searched")
    )
    train: TrainSection = field(default_factory=TrainSection, metadata=constraint("trial training"))
    mlm_head: MlmHeadSettings = field(
        default_factory=MlmHeadSettings,
        metadata=constraint(
            "a masked-LM head trained (encoder frozen) for a base that has none, before any trial weights an MLM "
            "term, cached by base, corpus and settings; the local and smoke profiles shrink it"
        ),
    )
    evaluation: EvaluationSection = field(default_factory=EvaluationSection, metadata=constraint("scoring"))
    address: str | None = field(default=None, metadata=constraint("Ray address; default RAY_ADDRESS or local"))
    study: StudySection | None = field(
        default=None, metadata=constraint("rows, seeds and table of a recipe study (python -m platform.study)")
    )
    tracking: TrackerSettings = field(
        default_factory=TrackerSettings,
        metadata=constraint(
            "experiment trackers by name (each below, and an installed package's: docs/plugins.md), each with its "
            "own settings; none by default"
        ),
    )
    profiles: dict[str, dict] = field(default_factory=dict, metadata=constraint("per-profile overrides"))

    def fixed_hyperparameters(self) -> TrialSettings:
        values = {**self.hyperparameters, "batch_size": self.train.batch_size, "recipe": self.recipe}
        return TrialSettings(**{k: v for k, v in values.items() if k not in self.search.space})

    def recipes(self) -> tuple[str, ...]:
        """Every recipe this search's trials may train (searched, or through a searched ``views``)."""
        if views := self.search.space.get("views"):
            from trainers.pairs import VIEWS

            return tuple(dict.fromkeys(VIEWS[v].recipe for v in views.values))
        searched = self.search.space.get("recipe")
        return tuple(searched.values) if searched else (self.fixed_hyperparameters().recipe,)

    def may_weight_mlm(self) -> bool:
        """Whether some trial (or study row) of this spec can train with ``mlm_weight`` > 0: the
        searched values (a range's upper end), else the fixed one, and every study row's."""
        return max(self._values_anywhere("mlm_weight")) > 0

    def may_take_hard_negatives(self) -> bool:
        """Whether some trial (or study row) of this spec trains with ``hard_negatives`` > 0: the
        corpus's BM25 neighbours are then mined before any trial starts (``doctune_core.data.neighbours``)."""
        return max(self._values_anywhere("hard_negatives")) > 0

    def may_anchor(self) -> bool:
        """Whether some trial (or study row) of this spec weights the anchor term (``anchor_weight`` > 0):
        its targets are then embedded before any trial starts (``trainers.anchor_targets``)."""
        return max(self._values_anywhere("anchor_weight")) > 0

    def _values_anywhere(self, name: str) -> list:
        """The values hyperparameter ``name`` takes in this spec: the searched ones (a range's ends), else the
        fixed one, and every study row's."""
        fixed = getattr(self.fixed_hyperparameters(), name)
        searched = self.search.space.get(name)
        values = list(searched.values) if searched else [fixed]
        return values + [row.get(name, fixed) for row in (self.study.rows.values() if self.study else ())]

    def poolings(self) -> tuple[str, ...]:
        """Every pooling a trial (or study row) of this spec may use."""
        return tuple(dict.fromkeys(self._values_anywhere("pooling")))

    def may_interpolate_positions(self) -> bool:
        """Whether some trial (or study row) of this spec starts from interpolated positions
        (``position_init: interpolate``): then the untrained interpolated conversion is scored too."""
        return "interpolate" in self._values_anywhere("position_init")
