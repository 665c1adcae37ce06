"""A search's inputs: the base encoder (the packaged or named model, or the vanilla base the spec
trains; given a masked-LM head where a trial may weight an MLM term; converted to a Longformer where
the spec asks) and the prepared corpus, checked against the recipes that train on it."""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from pathlib import Path

from doctune_core.data.corpus import PreparedCorpus
from doctune_core.run_files import RunFiles
from platform.spec.schema import CorpusSpec, LongformerSpec, SearchSpec
from trainers.config import BaseSettings, MlmHeadSettings, TrainPlan

log = logging.getLogger(f"doctune.{__name__}")


@dataclass(frozen=True, kw_only=True)
class InputsPlan:
    """What a search's inputs are made from: the part of the spec ``prepare_inputs`` reads, taken
    once (``of``) so that the base stage, run after ``resolve``, reads this plan and not the spec."""

    base_model: str
    base: BaseSettings | None  # a vanilla base the search trains first (``base:``)
    corpus: CorpusSpec
    longformer: LongformerSpec | None
    mlm_head: MlmHeadSettings
    may_weight_mlm: bool  # some trial may train with an MLM term (the base then needs a head)
    interpolates: (
        bool  # some trial may start from interpolated positions (doctune_core.longformer.interpolate_positions)
    )
    recipes: tuple[str, ...]  # every recipe a trial may train: each may refuse the corpus
    hard_negatives: bool  # some trial may take hard negatives: the corpus's neighbours are mined
    anchor_poolings: tuple[str, ...]  # some trial may weight the anchor term: its targets in these poolings
    # how the base stage's Ray Train run and the MLM head train (the spec's train: section)
    workers: int | str  # a count once fitted to the cluster (platform.search_path.settling.fit_to_cluster)
    cpus_per_worker: float
    gpus_per_worker: float
    bf16: bool
    max_worker_failures: int
    max_length: int
    seed: int

    @classmethod
    def of(cls, spec: SearchSpec) -> InputsPlan:
        train = spec.train
        return cls(
            base_model=spec.base_model,
            base=spec.base,
            corpus=spec.corpus,
            longformer=spec.backbone.longformer,
            mlm_head=spec.mlm_head,
            may_weight_mlm=spec.may_weight_mlm(),
            interpolates=spec.may_interpolate_positions(),
            recipes=spec.recipes(),
            hard_negatives=spec.may_take_hard_negatives(),
            anchor_poolings=spec.poolings() if spec.may_anchor() else (),
            workers=train.workers,
            cpus_per_worker=train.cpus_per_worker,
            gpus_per_worker=train.gpus_per_worker,
            bf16=train.bf16,
            max_worker_failures=train.max_worker_failures,
            max_length=train.max_length,
            seed=train.seed,
        )


@dataclass(frozen=True)
class PreparedInputs:
    """A search's inputs once prepared: the base model directory the trials start from (converted to
    a Longformer where the spec asks), the prepared corpus, and the base model directory before any
    conversion (the baseline row's model)."""

    model_dir: str
    corpus: PreparedCorpus
    source_model: str


def prepare_inputs(
    inputs: InputsPlan, build_base_in: Path | None = None, plan_only: bool = False, storage: RunFiles | None = None
) -> PreparedInputs:
    """The inputs ``inputs`` plans, prepared. Needs Ray when the corpus is not prepared
    yet (preparation is a Ray Data job): call it after ``ray_init``, and ``check_inputs`` before.

    With ``base:`` the base model is the vanilla base trained for this corpus and these settings:
    trained (or taken from the cache) when ``build_base_in`` names the run directory, which needs
    Ray and receives the stage's TensorBoard events; otherwise only its cache directory is named.

    A base without a masked-LM head, in a search where some trial may weight an MLM term, is
    replaced by the same encoder with a head trained for it here, in this process, on the corpus
    (``trainers.mlm_head``, cached); a head no better than the unigram baseline raises
    ``MlmHeadUnavailable`` (a ``ModelUnavailable``: bad input). With ``plan_only`` (``--dry-run``)
    a head not in the cache yet is only named, as a base not trained yet is. ``storage``: the files
    of a run kept at a storage URI, through which the trials receive the inputs (``trainers.inputs``)
    and a corpus prepared now reaches this machine (``doctune_core.data.corpus``), so no node need see
    this machine's cache (the base stage's work goes through them too: ``trainers.base_stage.staging``).
    Where some trial may take hard negatives, the corpus's BM25 neighbours are mined (once per corpus:
    ``doctune_core.data.neighbours``), and where some trial weights the anchor term, the start's
    embeddings of its texts are computed (``trainers.anchor_targets``); under ``plan_only`` neither yet.
    A conversion whose positions
    some trial would interpolate but cannot (a length not a multiple of the base's) is a
    ``SpecError``.
    """
    from doctune_core.data import cache_dir, prepare_corpus
    from doctune_core.data.neighbours import ensure_neighbours
    from doctune_core.encoder import embedding_length, resolve_model
    from doctune_core.longformer import cached_longformer, check_interpolable
    from platform.spec import SpecError
    from trainers.anchor_targets import ensure_anchor_targets
    from trainers.base_stage import base_entry, ensure_base
    from trainers.mlm_head import ensure_mlm_head, mlm_head_entry

    corpus = prepare_corpus(inputs.corpus.source, inputs.corpus.max_documents, through=storage)
    check_corpus_suits_recipes(inputs, corpus.stats)
    model_dir = resolve_model(inputs.base_model) if inputs.base is None else None
    if inputs.hard_negatives and not plan_only:
        ensure_neighbours(corpus)
    if inputs.base is not None and build_base_in is None:
        model_dir = str(base_entry(inputs.base, corpus.directory))
    elif inputs.base is not None:
        built = ensure_base(
            inputs.base,
            corpus.directory,
            inputs.corpus.source,
            workers=inputs.workers,
            cpus_per_worker=inputs.cpus_per_worker,
            gpus_per_worker=inputs.gpus_per_worker,
            bf16=inputs.bf16,
            max_worker_failures=inputs.max_worker_failures,
            logs_to=build_base_in / "base",
            through=storage,
        )
        model_dir = str(built.path)
    if needs_mlm_head(inputs, model_dir):
        max_length = embedding_length(model_dir, inputs.max_length)
        entry = mlm_head_entry(model_dir, corpus.directory, inputs.mlm_head, max_length, inputs.seed)
        if plan_only and not entry.is_dir():
            log.info(f"doctune: MLM head for {inputs.base_model} (not trained yet: a run trains it first): {entry}")
            model_dir = str(entry)
        else:
            model_dir = str(
                ensure_mlm_head(
                    model_dir,
                    corpus.directory,
                    inputs.mlm_head,
                    max_length=max_length,
                    seed=inputs.seed,
                    base_name=inputs.base_model,
                    corpus_name=inputs.corpus.source,
                ).path
            )
    source_model = model_dir  # the baseline row: the head's directory holds the base's encoder unchanged
    longformer = inputs.longformer
    if longformer is not None and Path(model_dir).is_dir():  # a base not trained yet is converted once it is
        model_dir = str(cached_longformer(model_dir, longformer.max_length, longformer.attention_window, cache_dir()))
        if inputs.interpolates:
            try:
                check_interpolable(model_dir)
            except ValueError as err:
                raise SpecError(str(err)) from None
        log.info(
            f"doctune: Longformer backbone from {inputs.base_model} ({longformer.max_length} positions, "
            f"window {longformer.attention_window}): {model_dir}",
        )
    if inputs.anchor_poolings and Path(model_dir).is_dir() and not plan_only:
        ensure_anchor_targets(model_dir, corpus, inputs.anchor_poolings, inputs.max_length)
    return PreparedInputs(model_dir, corpus, source_model)


def needs_mlm_head(inputs: InputsPlan, model_dir: str) -> bool:
    """Whether ``prepare_inputs`` trains a masked-LM head for the base in ``model_dir``: some trial
    may weight an MLM term and the base carries no head (a base not trained yet will: the base
    stage trains one)."""
    from doctune_core.encoder import has_mlm_head

    return inputs.may_weight_mlm and Path(model_dir).is_dir() and not has_mlm_head(model_dir)


def check_inputs(inputs: InputsPlan) -> None:
    """What can be checked of the inputs before Ray starts: the base model resolves, the corpus
    source exists in a format doctune reads. Raises ``ModelUnavailable`` or ``DataUnavailable``."""
    from doctune_core.data import check_source
    from doctune_core.encoder import resolve_model

    if inputs.base is None:
        resolve_model(inputs.base_model)
    check_source(inputs.corpus.source)


def check_corpus_suits_recipes(inputs: InputsPlan, stats) -> None:
    """Each recipe the search may train refuses a corpus it cannot train on (``Recipe.corpus_problem``)."""
    from doctune_core.data import DataUnavailable
    from trainers.pairs import RECIPES

    for recipe in inputs.recipes:
        if problem := RECIPES[recipe]().corpus_problem(stats):
            raise DataUnavailable(f"corpus {inputs.corpus.source!r}: {problem}")


def share_through_storage(plan: TrainPlan) -> TrainPlan:
    """``plan`` with its inputs in the driver's cache uploaded to the run's storage, once
    (``trainers.inputs``), for Train workers on nodes that do not see this machine's cache."""
    from doctune_core.data import cache_dir
    from trainers.inputs import share_inputs

    paths = (plan.base_model, plan.corpus_path, *filter(None, [plan.neighbours_path, plan.anchor_targets_path]))
    shared = share_inputs(plan.run_files, paths, cache_dir())
    for path, name in shared.items():
        log.info(f"doctune: {path} shared through the run's storage as {name}")
    return dataclasses.replace(plan, inputs=shared)
