"""Typed configuration that travels from the driver into Tune trials and Train workers.

The driver (``platform.spec``) validates a YAML spec once and builds these objects; code in the
workers only ever sees them, never raw dicts.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Literal, Protocol, TypeVar

from doctune_core.data.neighbours import MINED
from doctune_core.fields import constraint
from doctune_core.run_files import RunFiles

Pooling = Literal["cls", "mean", "max"]
T = TypeVar("T")
Trainable = Literal["all", "positions", "positions+top"]  # trainers.trainable
PositionInit = Literal["copy", "interpolate"]  # doctune_core.longformer.interpolate_positions


class Scorer(Protocol):
    """How a trial's checkpoints are scored, handed to it by the driver
    (``evaluators.pool.CheckpointScorer``): trainers never import the evaluators."""

    def __call__(self, checkpoint: str, pooling: str, name: str | None = None) -> dict:
        """The checkpoint's scores (written beside it as ``scores.json``); ``name``: the path the
        checkpoint goes by, if not ``checkpoint`` (a staged round: where its report persists it)."""
        ...

    def metrics(self, scores: dict) -> dict[str, float]:
        """What a round reports of its scores: they, flattened, and ``objective`` (validation only)."""
        ...


@dataclass(frozen=True)
class NoSettings:
    """The settings of a plug-in that has none of its own."""


def own_settings(hp: object, settings: type[T]) -> T:
    """A plug-in's own settings (``settings``, a dataclass) with their values in a trial's flat
    ``hp`` (``trainers.settings.TrialSettings``): what the plug-in receives, and nothing else."""
    return settings(**{f.name: getattr(hp, f.name) for f in fields(settings)})


@dataclass(frozen=True)
class Hyperparameters:
    """The settings every trial reads, whatever its recipe and loss: ``recipe`` (or ``views``, which
    decides it), ``loss``, ``lr``, ``weight_decay``, ``warmup_ratio``, ``batch_size``, ``pooling``,
    ``contrastive_weight``, ``mlm_weight``, ``hard_negatives`` (``trainers.hard_negatives``),
    ``trainable`` (``trainers.trainable``) and ``position_init``
    (``doctune_core.longformer.interpolate_positions``). Each recipe's and loss's own settings live
    in its module (its ``settings`` class; the Bregman term's in ``trainers.losses.bregman``);
    ``trainers.settings.TrialSettings`` assembles them with these into the one flat namespace a
    spec and Optuna see, and turns ``views`` into the recipe and the settings it fixes."""

    recipe: str | None = field(
        default=None,
        metadata=constraint(
            "positive-pair recipe, by the name it is registered under (docs/recipes.md lists them; unset: the "
            "default recipe)"
        ),
    )
    views: str | None = field(
        default=None,
        metadata=constraint(
            "augmentation type: how a document's two views are made, as each recipe declares its own (its views; "
            "docs/recipes.md lists each with its paper); set, it decides recipe and elongate, which a spec then "
            "leaves out"
        ),
    )
    lr: float = field(
        default=5e-5, metadata=constraint("AdamW learning rate", 0.0, 1.0, low_open=True, perturbable=True)
    )
    loss: str | None = field(
        default=None,
        metadata=constraint(
            "contrastive loss, by the name it is registered under (docs/recipes.md lists them with their papers); "
            "unset: the recipe's own"
        ),
    )
    mlm_weight: float = field(
        default=0.1, metadata=constraint("weight of the auxiliary MLM loss", 0.0, 100.0, perturbable=True)
    )
    contrastive_weight: float = field(
        default=1.0, metadata=constraint("lambda_c: weight of the contrastive loss", 0.0, 100.0)
    )
    pooling: Pooling = field(default="mean", metadata=constraint("how token states become one embedding"))
    batch_size: int = field(
        default=8,
        metadata=constraint("positive pairs per optimizer step, across all workers (in-batch negatives)", 1, 1_000_000),
    )
    hard_negatives: int = field(
        default=0,
        metadata=constraint(
            "BM25-mined hard negatives a pair, views of its document's neighbours in the pretraining corpus made by "
            "the trial's recipe (trainers.hard_negatives; near duplicates excluded); 0: in-batch negatives only",
            0,
            MINED,
        ),
    )
    weight_decay: float = field(default=0.01, metadata=constraint("AdamW weight decay", 0.0, 1.0))
    trainable: Trainable = field(
        default="all",
        metadata=constraint(
            "what trains: all; positions (a converted Longformer's new position rows alone, LongEmbed's tuning: "
            "inputs as long as the base read are embedded as before); positions+top (and the top 2 layers)"
        ),
    )
    position_init: PositionInit = field(
        default="copy",
        metadata=constraint(
            "how a converted Longformer's new positions start: copy (the base's rows block by block, as the "
            "conversion makes them); interpolate (LongEmbed's interpolation, read so that inputs as long as the "
            "base read embed as before; doctune_core.position_interpolation)"
        ),
    )
    skipped_positions: int = field(
        default=0,
        metadata=constraint(
            "read each training view as a part of a text of up to this many tokens, its position ids skipped ahead "
            "(PoSE; trainers.skipped_positions), so inputs of the base's length reach a converted Longformer's new "
            "position rows; 0: positions as read",
            0,
            1_000_000,
        ),
    )
    warmup_ratio: float = field(default=0.1, metadata=constraint("share of steps with linear warm-up", 0.0, 1.0))


@dataclass(frozen=True)
class BaseSettings:
    """A vanilla base encoder made here (``trainers.base_stage``): a WordPiece vocabulary and a BERT
    trained from scratch on the search's corpus with the masked-LM objective only (Devlin et al.,
    NAACL 2019, Sec. 3.1). The default size is BERT-Mini (Turc et al. 2019: 4 layers, hidden 256,
    4 heads, feed-forward 1024). Every field but ``checkpoint_every`` is part of the cache key,
    with the corpus content."""

    layers: int = field(default=4, metadata=constraint("transformer layers", 1, 96))
    hidden: int = field(default=256, metadata=constraint("hidden size (a multiple of heads)", 8, 16384))
    heads: int = field(default=4, metadata=constraint("attention heads per layer", 1, 256))
    intermediate: int = field(default=1024, metadata=constraint("feed-forward size (BERT: 4 x hidden)", 8, 65536))
    vocab_size: int = field(
        default=8000, metadata=constraint("WordPiece vocabulary trained on the corpus (special tokens included)", 100)
    )
    lowercase: bool = field(default=True, metadata=constraint("lowercase and strip accents (an uncased model)"))
    max_length: int = field(
        default=512,
        metadata=constraint(
            "tokens per training sequence and the positions the model has; train.max_length and "
            "evaluation.max_length may not exceed it",
            16,
            65536,
        ),
    )
    steps: int = field(default=2000, metadata=constraint("MLM optimizer steps", 1))
    lr: float = field(default=5e-4, metadata=constraint("AdamW peak learning rate", 0.0, 1.0, low_open=True))
    batch_size: int = field(
        default=32, metadata=constraint("sequences per step across all workers (a multiple of train.workers)", 1)
    )
    warmup_ratio: float = field(default=0.1, metadata=constraint("share of steps with linear warm-up", 0.0, 1.0))
    seed: int = field(default=0, metadata=constraint("seed of the initial weights, batch order and masking"))
    checkpoint_every: int = field(
        default=500, metadata=constraint("steps between resumable checkpoints (not part of the cache key)", 1)
    )

    @property
    def label(self) -> str:
        """A short name for records and reports (the cache digest identifies the weights)."""
        return f"vanilla-bert-L{self.layers}-H{self.hidden}-V{self.vocab_size}-{self.steps}steps"


@dataclass(frozen=True)
class MlmHeadSettings:
    """The masked-LM head trained for a base that has none (``trainers.mlm_head``), with the encoder
    frozen, before any trial weights an MLM term. Sequences are ``train.max_length`` tokens (at most
    the base's positions) packed from the corpus's first documents; every field is part of the
    cache key, with the base's weights, the corpus content, that length and ``train.seed``."""

    sequences: int = field(
        default=1024,
        metadata=constraint(
            "training sequences of train.max_length tokens (15% masked, BERT's rule): more text, a better head", 1
        ),
    )
    held_out: int = field(
        default=128,
        metadata=constraint(
            "sequences from the documents after the training ones: the head's loss and the unigram baseline's are "
            "measured on their masked positions, and a head no better than the baseline is refused",
            1,
        ),
    )
    epochs: int = field(default=4, metadata=constraint("passes over the training sequences' masked positions", 1))
    lr: float = field(default=1e-2, metadata=constraint("AdamW peak learning rate", 0.0, 1.0, low_open=True))


@dataclass(frozen=True)
class TrainPlan:
    """The fixed part of every trial in one search (what does not vary per trial)."""

    run_uri: str  # where the run's shared files are: its directory, or --storage's URI (doctune_core.run_files)
    base_model: str  # a local directory, resolved by the driver
    base_model_name: str  # as the user wrote it, for the record
    corpus_path: str  # prepared corpus directory (doctune_core.data.PreparedCorpus)
    corpus_name: str
    steps: int
    eval_every: int
    max_length: int
    workers: int
    use_gpu: bool
    cpus_per_worker: float
    gpus_per_worker: float
    threads_per_worker: int
    seed: int
    bf16: bool
    max_worker_failures: int
    scorer: Scorer
    gradient_checkpointing: bool = False
    # GradCache chunk (sequences per forward); "auto": measured per worker; None: the whole batch at once
    chunk_size: int | str | None = None
    overlap_scoring: bool = True  # train on while the pool scores a round (trainers.reporting)
    # Population Based Training: every round's checkpoint keeps its training state (another trial may
    # continue from it) and reports go to Tune with a checkpoint (trainers.population)
    population: bool = False
    # the corpus's mined BM25 neighbours (doctune_core.data.neighbours), where some trial takes hard negatives
    neighbours_path: str | None = None
    # the anchor term's texts and the start's embeddings of them (trainers.anchor_targets), where some trial weights it
    anchor_targets_path: str | None = None
    # the driver's input paths (base_model, corpus_path, neighbours_path, anchor_targets_path) -> their copies
    # in the run's files, for nodes that do not see the driver's cache (trainers.inputs; empty where the run is
    # a local directory)
    inputs: dict[str, str] = field(default_factory=dict)

    @property
    def run_files(self) -> RunFiles:
        """The run's files, through which a trial shares its checkpoints and records (``doctune_core.run_files``)."""
        return RunFiles.at(self.run_uri)

    @property
    def eval_rounds(self) -> int:
        return -(-self.steps // self.eval_every)
