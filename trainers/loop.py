"""The per-worker training loop, one for every recipe: recipes differ only in how positive pairs
are built (``trainers.pairs``) and which loss terms apply (``trainers.losses``)."""

from __future__ import annotations

import copy
import dataclasses
import logging
import random
import resource
import shutil
import time
import zlib
from pathlib import Path, PurePosixPath
from typing import TypeVar

import torch
import torch.distributed as dist
import torch.nn as nn

from doctune_core.data import DocumentStream, PreparedCorpus, StreamPosition
from doctune_core.data.neighbours import Neighbours
from doctune_core.encoder import bf16_autocast, tokenize
from trainers.anchor_targets import AnchorTargets
from trainers.batches import PairStream, Prefetched
from trainers.checkpoint import (
    CHECKPOINTS,
    load_training_state,
    record_divergence,
    reported_rounds,
    save_checkpoint,
    staging_dir,
    step_name,
    trial_path,
)
from trainers.config import Hyperparameters, TrainPlan, own_settings
from trainers.distributed import finite_everywhere, record_placement, training_device
from trainers.grad_cache import all_reduce_gradients, cached_step
from trainers.hard_negatives import HardNegatives
from trainers.inputs import on_this_node
from trainers.losses import AnchorSettings, mask_tokens
from trainers.model import ContrastiveModel, build_module
from trainers.pairs import STATISTICS_DOCUMENTS, PairBuilder, build_pairs
from trainers.population import record_loaded_weights, resume_point
from trainers.reporting import RoundReporter
from trainers.rounds import RoundWindow, checkpoint_record, peak_gpu_memory
from trainers.schedule import lr_factor
from trainers.skipped_positions import batch_position_ids
from trainers.trainable import parameter_groups
from trainers.training_loss import training_loss

log = logging.getLogger(f"doctune.{__name__}")

T = TypeVar("T")


@dataclasses.dataclass
class WorkerTrial:
    """One Train worker's share of a trial: what it trains, how, and where its rounds go."""

    plan: TrainPlan
    hp: Hyperparameters
    trial_id: str
    rank: int
    world: int
    device: torch.device
    module: ContrastiveModel
    wrapped: nn.Module  # DDP's wrapper of ``module``, or ``module`` itself under GradCache
    tokenizer: object
    optimizer: torch.optim.Optimizer
    autocast: object
    chunk_size: int | None  # GradCache's chunk; None: one forward and backward a step, under DDP
    reporter: RoundReporter
    mask_rng: torch.Generator

    @property
    def staging(self) -> Path:
        """Where rank 0 writes a round's checkpoint before its report persists it."""
        return staging_dir(self.trial_id)


@dataclasses.dataclass(frozen=True)
class ResumePoint:
    """Where a worker's steps begin: a fresh trial's (0, 0, the stream's start) or a checkpoint's."""

    step: int = 0
    eval_round: int = 0
    stream: StreamPosition = dataclasses.field(default_factory=StreamPosition)


def train_loop_per_worker(config: dict) -> None:
    """Ray Train's loop for one worker of a trial: start (or resume), then steps, a checkpoint and
    a report every ``plan.eval_every`` steps; a loss that is not finite on some rank ends the trial."""
    started = time.perf_counter()
    trial, documents, pairs, negatives, anchors, batch_tokenizer = _start_worker(config)
    plan, hp = trial.plan, trial.hp
    resumed = _resume(trial)
    stream = PairStream(
        documents.read(resumed.stream),
        pairs,
        hp.batch_size // trial.world,
        plan.seed,
        trial.rank,
        give_up_after=documents.rows,
        negatives=negatives,
    )

    anchor_count = own_settings(hp, AnchorSettings).anchor_texts

    def build_batch(step: int):
        batch = stream.batch(step)
        texts, targets = batch.texts, None
        if anchors is not None:  # the anchor term's short texts, after the pairs
            anchor_texts, targets = anchors.draw(anchor_count, random.Random(f"{plan.seed}/{trial.rank}/anchors{step}"))
            texts = texts + anchor_texts
        tokens = tokenize(batch_tokenizer, texts, plan.max_length)
        if hp.skipped_positions:  # the views read at a long text's positions; the anchor's texts as the start read them
            views = len(texts) - (0 if targets is None else len(targets))
            seed = zlib.crc32(f"{plan.seed}/{trial.rank}/positions{step}".encode())
            tokens["position_ids"] = batch_position_ids(
                trial.module.encoder.config, tokens["attention_mask"], views, hp.skipped_positions, seed
            )
        return len(batch.views_a), tokens, targets

    batches = Prefetched(build_batch, plan.steps)
    window, eval_round = RoundWindow(), resumed.eval_round
    for step in range(resumed.step, plan.steps):
        began = time.perf_counter()
        loss, terms, tokens = train_step(trial, step, *batches(step))
        if not finite_everywhere(loss):
            _end_diverged(trial, step, loss)
            batches.close()
            return
        # the gradient's norm before clipping: how much the step's views had to teach
        terms["grad_norm"] = float(torch.nn.utils.clip_grad_norm_(trial.module.parameters(), 1.0))
        trial.optimizer.step()
        if step == resumed.step:  # this worker's start-up: the model, its documents, the first batch and step
            first_step_seconds = time.perf_counter() - started
        window.add(step + 1, terms, tokens, time.perf_counter() - began)
        trial.reporter.poll(step + 1)
        if (step + 1) % plan.eval_every == 0 or step + 1 == plan.steps:
            eval_round += 1
            trial.reporter.wait(step + 1)  # the previous round first: only the latest checkpoint may lack scores
            metrics = {"step": step + 1, "eval_round": eval_round, **window.metrics()}
            metrics |= {"skipped_documents": stream.skipped, "first_step_seconds": first_step_seconds}
            _save_and_report_round(trial, stream, step, metrics, window.steps)
            window = RoundWindow()
    trial.reporter.wait(plan.steps)
    trial.reporter.close()
    batches.close()
    if trial.rank == 0:  # every staged round was persisted by its report and deleted; the trial's folder goes too
        shutil.rmtree(trial.staging, ignore_errors=True)


def _start_worker(
    config: dict,
) -> tuple[WorkerTrial, DocumentStream, PairBuilder, HardNegatives | None, AnchorTargets | None, object]:
    """This worker's trial set up: its device, the model built and wrapped for data parallelism,
    its share of the corpus, the recipe's pair builder, the hard negatives and the anchor term's
    targets where the trial takes them (and the tokenizer the batch thread uses)."""
    import ray.train
    import ray.train.torch

    plan: TrainPlan = config["plan"]
    hp: Hyperparameters = config["hp"]
    trial_id: str = config["trial_id"]
    torch.set_num_threads(plan.threads_per_worker)
    context = ray.train.get_context()
    rank, world = context.get_world_rank(), context.get_world_size()
    torch.manual_seed(plan.seed + rank)
    device = training_device()
    files = plan.run_files
    record_placement(files, trial_id, device)

    base_model, corpus = (on_this_node(files, plan.inputs, path) for path in (plan.base_model, plan.corpus_path))
    module, tokenizer = build_module(base_model, hp, plan.gradient_checkpointing)
    prepared = PreparedCorpus.load(corpus)
    documents = DocumentStream(prepared, rank, world, plan.seed)
    batch_tokenizer = copy.deepcopy(tokenizer)  # the batch thread's own: a fast tokenizer is not thread-safe
    pairs = build_pairs(
        hp,
        max_length=plan.max_length,
        count_tokens=lambda text: len(batch_tokenizer(text, add_special_tokens=False)["input_ids"]),
        documents=documents.first(STATISTICS_DOCUMENTS),
    )
    # GradCache runs several forwards per step, which DDP's one-forward-one-backward contract does
    # not allow: the module is then only moved to the device and gradients are averaged by hand.
    cached = plan.chunk_size is not None
    wrapped = ray.train.torch.prepare_model(module, move_to_device=device, parallel_strategy=None if cached else "ddp")
    autocast = bf16_autocast(device, plan.bf16)
    chunk_size = plan.chunk_size
    if chunk_size == "auto":
        chunk_size = _probed_chunk_size(module, tokenizer, plan, hp, context, device, autocast, trial_id)
    trial = WorkerTrial(
        plan=plan,
        hp=hp,
        trial_id=trial_id,
        rank=rank,
        world=world,
        device=device,
        module=module,
        wrapped=wrapped,
        tokenizer=tokenizer,
        optimizer=torch.optim.AdamW(parameter_groups(module, hp.trainable, hp.weight_decay), lr=hp.lr),
        autocast=autocast,
        chunk_size=chunk_size,
        reporter=RoundReporter(plan, hp, trial_id, rank, device),
        mask_rng=torch.Generator().manual_seed(plan.seed * 1000 + rank),
    )
    negatives = None
    if hp.hard_negatives:
        neighbours = Neighbours.load(on_this_node(files, plan.inputs, plan.neighbours_path))
        negatives = HardNegatives(prepared, neighbours, hp.hard_negatives, pairs)
    anchors = None
    if own_settings(hp, AnchorSettings).anchor_weight > 0:
        anchors = AnchorTargets.load(on_this_node(files, plan.inputs, plan.anchor_targets_path), hp.pooling)
    return trial, documents, pairs, negatives, anchors, batch_tokenizer


def _resume(trial: WorkerTrial) -> ResumePoint:
    """Where this worker begins: the trial's latest reported round as its storage holds it, a PBT
    donor's round (``trainers.population``), or the start. A resumed trial reports again the rounds
    it had reported before it was killed (they may not have reached the search)."""
    import ray.train

    files, trial_id = trial.plan.run_files, trial.trial_id
    if trial.rank == 0:  # a round staged but never reported (killed before its report) is trained again
        shutil.rmtree(trial.staging, ignore_errors=True)
    own = ray.train.get_checkpoint()
    own_path = trial_path(trial_id, CHECKPOINTS, PurePosixPath(own.path).name) if own is not None else None
    resume_from, from_donor = resume_point(files, trial_id, own_path)
    if resume_from is None:
        return ResumePoint()
    with files.as_local_dir(resume_from) as checkpoint:  # fetched where the run is in a bucket
        state = load_training_state(checkpoint, trial.module, trial.optimizer)
        if from_donor and trial.rank == 0:
            record_loaded_weights(files, trial_id, trial.module.encoder, checkpoint)
    positions = state.get("stream_positions")  # absent from checkpoints of before the streamed corpus
    resumed = ResumePoint(
        state["step"], state["eval_round"], StreamPosition(*positions[trial.rank]) if positions else StreamPosition()
    )
    name = PurePosixPath(resume_from).name
    if from_donor:  # the donor reported that round; this trial goes on from it with its own settings
        if trial.rank == 0:
            log.info(f"[{trial_id}] continues from {files.path(resume_from)} (PBT exploit; step {resumed.step})")
    else:
        if trial.rank == 0:
            log.info(f"[{trial_id}] resumed from {name} (step {resumed.step}, documents from {resumed.stream})")
        trial.reporter.report_again([r for r in reported_rounds(files, trial_id) if r <= name])
    return resumed


def train_step(
    trial: WorkerTrial, step: int, n: int, batch: dict, anchor_targets: torch.Tensor | None = None
) -> tuple[torch.Tensor, dict[str, float], int]:
    """One step's forward and backward over a batch of ``n`` pairs (both views, their hard negatives,
    the anchor term's texts, then the MLM term's masked view A where it is on; ``anchor_targets``:
    the start's embeddings of those texts), at the step's learning rate: (loss, its terms, tokens read)."""
    module, device = trial.module, trial.device
    inputs = {"input_ids": batch["input_ids"].to(device), "attention_mask": batch["attention_mask"].to(device)}
    if "position_ids" in batch:  # skipped positions (trainers.skipped_positions)
        inputs["position_ids"] = batch["position_ids"].to(device)
    if anchor_targets is not None:
        inputs["anchor_targets"] = anchor_targets.to(device)
    tokens = int(batch["attention_mask"].sum())
    if module.with_mlm:
        inputs |= _mlm_inputs(batch, n, trial.tokenizer, trial.mask_rng, device)
        tokens += int(batch["attention_mask"][:n].sum())
    for group in trial.optimizer.param_groups:
        group["lr"] = trial.hp.lr * lr_factor(step, trial.plan.steps, trial.hp.warmup_ratio)
    trial.optimizer.zero_grad(set_to_none=True)
    if trial.chunk_size is not None:
        loss, terms = cached_step(module, inputs, trial.hp, trial.chunk_size, trial.autocast)
        all_reduce_gradients(module)
    else:
        with trial.autocast:
            outputs = trial.wrapped(**inputs)
        loss, terms = training_loss(trial.hp, outputs)
        loss.backward()
    return loss, terms, tokens


def _end_diverged(trial: WorkerTrial, step: int, loss: torch.Tensor) -> None:
    """A diverged trial ends here, on every rank at once (a worker-group restart would only diverge
    again); ``run_trial`` turns the record into the trial's error."""
    trial.reporter.wait(step)
    trial.reporter.close()
    if trial.rank == 0:
        record_divergence(trial.plan.run_files, trial.trial_id, step, loss.item())
        log.error(f"[{trial.trial_id}] loss became {loss.item()} at step {step}; the trial ends")


def _save_and_report_round(trial: WorkerTrial, stream: PairStream, step: int, metrics: dict, steps: list[dict]) -> None:
    """The round ending after ``step``: rank 0 saves its checkpoint (with every rank's stream
    position, and each of the round's ``steps``: its loss terms, views' cosines and gradient norm,
    rank 0's) to the staging folder, and the reporter hands it to the search with ``metrics``."""
    metrics = {
        **metrics,
        "worker_peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,  # KiB on Linux
        **peak_gpu_memory(trial.device),
        **({"chunk_size": trial.chunk_size} if trial.chunk_size is not None else {}),  # GradCache's (auto: measured)
    }
    stream_positions = _gathered(dataclasses.astuple(stream.position(step)))
    staged = trial.staging / step_name(step + 1)
    if trial.rank == 0:
        save_checkpoint(
            staged,
            encoder=trial.module.encoder,
            full_model=trial.module,
            tokenizer=trial.tokenizer,
            optimizer=trial.optimizer,
            record=checkpoint_record(trial.plan, trial.hp, trial.trial_id, step + 1),
            state={
                "step": step + 1,
                "eval_round": metrics["eval_round"],
                "train_metrics": metrics,
                "stream_positions": stream_positions,  # each rank's (epoch, offset)
            },
            steps=steps,
        )
    trial.reporter.submit(staged, metrics, step + 1)


def _probed_chunk_size(module, tokenizer, plan: TrainPlan, hp: Hyperparameters, context, device, autocast, trial_id):
    """``chunk_size: auto``: the largest chunk that fits this worker (trainers.memory), the
    smallest over all ranks, so every rank runs the same chunks."""
    from trainers.memory import probe_chunk_size

    # both views of each pair, its hard negatives, and the anchor term's texts
    anchor = own_settings(hp, AnchorSettings)
    sequences = (2 + hp.hard_negatives) * (hp.batch_size // context.get_world_size())
    sequences += anchor.anchor_texts if anchor.anchor_weight > 0 else 0
    probe = probe_chunk_size(
        module,
        len(tokenizer),
        plan.max_length,
        device,
        limit=sequences,
        workers_on_node=context.get_local_world_size(),
        autocast=autocast,
    )
    chunk = torch.tensor([probe.chunk_size], device=device)
    if dist.is_initialized():
        dist.all_reduce(chunk, op=dist.ReduceOp.MIN)
    if context.get_world_rank() == 0:
        log.info(f"[{trial_id}] chunk_size auto: {int(chunk.item())} ({probe.describe()} on rank 0)")
    return int(chunk.item())


def _gathered(value: T) -> list[T]:
    """Every rank's ``value``, in rank order."""
    if not dist.is_initialized():
        return [value]
    values: list = [None] * dist.get_world_size()
    dist.all_gather_object(values, value)
    return values


def _mlm_inputs(batch: dict, n: int, tokenizer, mask_rng: torch.Generator, device: torch.device) -> dict:
    """The MLM term's inputs: view A's ``n`` sequences with tokens masked (BERT's 80/10/10 rule,
    ``trainers.losses.mlm``), padding and special tokens never masked."""
    masked, labels = mask_tokens(
        batch["input_ids"][:n],
        batch["special_tokens_mask"][:n] | (1 - batch["attention_mask"][:n]),
        tokenizer.mask_token_id,
        len(tokenizer),
        mask_rng,
    )
    return {
        "mlm_input_ids": masked.to(device),
        "mlm_labels": labels.to(device),
        "mlm_attention_mask": batch["attention_mask"][:n].to(device),
    }
