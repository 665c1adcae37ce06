"""The per-worker training loop, one for every recipe: recipes differ only in how positive pairs
are built (``trainers.pairs``) and which loss terms apply (``trainers.losses``)."""

from __future__ import annotations

import copy
import dataclasses
import os
import resource
import shutil
import time
from pathlib import PurePosixPath
from typing import TypeVar

import torch
import torch.distributed as dist
import torch.nn as nn

from core.data import DocumentStream, PreparedCorpus, StreamPosition
from core.encoder import bf16_autocast, embed_in_length_groups, load_encoder, tokenize
from core.longformer import base_position_rows, first_new_position, interpolate_positions
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
from trainers.config import Hyperparameters, TrainPlan
from trainers.distributed import finite_everywhere, record_placement, training_device, world_size
from trainers.grad_cache import all_reduce_gradients, cached_step
from trainers.inputs import on_this_node
from trainers.losses import mask_tokens, masked_lm_loss
from trainers.memory import MIB
from trainers.pairs import STATISTICS_DOCUMENTS, build_pairs
from trainers.population import record_loaded_weights, resume_point
from trainers.reporting import RoundReporter
from trainers.schedule import lr_factor
from trainers.trainable import freeze_for, parameter_groups
from trainers.training_loss import LossHeads, training_loss

T = TypeVar("T")


class ContrastiveModel(nn.Module):
    """Both views in one encoder forward, the loss heads, and the MLM forward when its weight is
    non-zero. Everything goes through this one ``forward`` so DDP sees (and synchronises) every
    gradient."""

    def __init__(self, model: nn.Module, pooling: str, with_mlm: bool, heads: LossHeads | None = None) -> None:
        super().__init__()
        self.model = model
        self.pooling = pooling
        self.with_mlm = with_mlm
        self.heads = heads

    @property
    def encoder(self) -> nn.Module:
        return self.model.base_model if self.with_mlm else self.model

    @staticmethod
    def length_groups(input_ids: torch.Tensor) -> int:
        """How many forwards ``embed`` splits a batch into. On the CPU, rows of similar length share a
        forward (at least 8 rows each, at most 4 forwards): fewer padded positions computed. On a GPU
        one forward: a small encoder's step is bound by kernel launches there, and each group adds a
        forward's launches and a sync (bench/RESULTS.md, "Training on a GPU")."""
        return 1 if input_ids.is_cuda else min(4, input_ids.shape[0] // 8)

    def embed(self, input_ids, attention_mask):
        groups = self.length_groups(input_ids)
        return embed_in_length_groups(self.encoder, input_ids, attention_mask, self.pooling, groups)

    def mlm_loss(self, input_ids, attention_mask, labels):
        return masked_lm_loss(self.model, input_ids, attention_mask, labels)

    def forward(self, input_ids, attention_mask, mlm_input_ids=None, mlm_labels=None, mlm_attention_mask=None):
        outputs = {"embeddings": self.embed(input_ids, attention_mask)}
        if self.heads is not None:
            outputs |= self.heads(outputs["embeddings"])
        if mlm_labels is not None:
            outputs["mlm_loss"] = self.mlm_loss(mlm_input_ids, mlm_attention_mask, mlm_labels)
        return outputs


def build_module(
    model_dir: str, hp: Hyperparameters, gradient_checkpointing: bool = False
) -> tuple[ContrastiveModel, object]:
    """The trainable module for one trial (encoder, loss heads, MLM head if used), in train mode."""
    with_mlm = hp.mlm_weight > 0
    model, tokenizer = load_encoder(model_dir, with_mlm_head=with_mlm)
    if gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    first_new = first_new_position(model_dir)
    if hp.position_init == "interpolate":
        interpolate_positions(model, first_new)
    freeze_for(model, hp.trainable, base_position_rows(model, first_new))  # before DDP: frozen is never synced
    encoder = model.base_model if with_mlm else model
    module = ContrastiveModel(model, hp.pooling, with_mlm, LossHeads(hp, encoder.config.hidden_size))
    module.train()  # from_pretrained returns eval mode: no dropout, which SimCSE-style views rely on
    return module, tokenizer


# Tests make a trial's loss NaN at this step (tests/test_faults.py); the driver passes every
# DOCTUNE_* variable on to the workers. Not a spec key: a user's search never injects faults.
FAULT_NAN_ENV = "DOCTUNE_FAULT_NAN_AT_STEP"
FAULT_TRIAL_ENV = "DOCTUNE_FAULT_TRIAL_SUFFIX"  # the fault only in trials whose id ends so


def train_loop_per_worker(config: dict) -> None:
    import ray.train
    import ray.train.torch

    started = time.perf_counter()
    plan: TrainPlan = config["plan"]
    hp: Hyperparameters = config["hp"]
    trial_id: str = config["trial_id"]
    fault_nan_at_step = int(os.environ[FAULT_NAN_ENV]) if FAULT_NAN_ENV in os.environ else None
    if not trial_id.endswith(os.environ.get(FAULT_TRIAL_ENV, "")):
        fault_nan_at_step = None
    torch.set_num_threads(plan.threads_per_worker)
    context = ray.train.get_context()
    rank = context.get_world_rank()
    torch.manual_seed(plan.seed + rank)
    device = training_device()
    files = plan.run_files
    record_placement(files, trial_id, device)

    base_model, corpus = (on_this_node(files, plan.inputs, path) for path in (plan.base_model, plan.corpus_path))
    module, tokenizer = build_module(base_model, hp, plan.gradient_checkpointing)
    with_mlm = module.with_mlm
    documents = DocumentStream(PreparedCorpus.load(corpus), rank, context.get_world_size(), plan.seed)
    batch_tokenizer = copy.deepcopy(tokenizer)  # the batch thread's own: a fast tokenizer is not thread-safe
    pairs = build_pairs(
        hp,
        max_length=plan.max_length,
        count_tokens=lambda text: len(batch_tokenizer(text, add_special_tokens=False)["input_ids"]),
        documents=documents.first(STATISTICS_DOCUMENTS),
    )

    def build_batch(step: int):
        views_a, views_b = stream.batch(step)
        return len(views_a), tokenize(batch_tokenizer, views_a + views_b, plan.max_length)

    # GradCache runs several forwards per step, which DDP's one-forward-one-backward contract does
    # not allow: the module is then only moved to the device and gradients are averaged by hand.
    cached = plan.chunk_size is not None
    wrapped = ray.train.torch.prepare_model(module, move_to_device=device, parallel_strategy=None if cached else "ddp")
    autocast = bf16_autocast(device, plan.bf16)
    chunk_size = plan.chunk_size
    if chunk_size == "auto":
        chunk_size = _probed_chunk_size(module, tokenizer, plan, hp, context, device, autocast, trial_id)
    optimizer = torch.optim.AdamW(parameter_groups(module, hp.trainable, hp.weight_decay), lr=hp.lr)

    start_step, eval_round, stream_start = 0, 0, StreamPosition()
    reporter = RoundReporter(plan, hp, trial_id, rank, device)
    staging = staging_dir(trial_id)
    if rank == 0:  # a round staged but never reported (killed before its report) is trained again
        shutil.rmtree(staging, ignore_errors=True)
    own = ray.train.get_checkpoint()  # the trial's latest reported round, as its storage holds it
    own_path = trial_path(trial_id, CHECKPOINTS, PurePosixPath(own.path).name) if own is not None else None
    resume_from, from_donor = resume_point(files, trial_id, own_path)  # a donor's: PBT (trainers.population)
    if resume_from is not None:
        with files.as_local_dir(resume_from) as checkpoint:  # fetched where the run is in a bucket
            state = load_training_state(checkpoint, module, optimizer)
            if from_donor and rank == 0:
                record_loaded_weights(files, trial_id, module.encoder, checkpoint)
        start_step, eval_round = state["step"], state["eval_round"]
        positions = state.get("stream_positions")  # absent from checkpoints of before the streamed corpus
        stream_start = StreamPosition(*positions[rank]) if positions else StreamPosition()
        name = PurePosixPath(resume_from).name
        if from_donor:  # the donor reported that round; this trial goes on from it with its own settings
            if rank == 0:
                print(f"[{trial_id}] continues from {files.path(resume_from)} (PBT exploit; step {start_step})")
        else:
            if rank == 0:
                print(f"[{trial_id}] resumed from {name} (step {start_step}, documents from {stream_start})")
            # the rounds reported before the kill may not have reached the search (trainers.reporting)
            reporter.report_again([r for r in reported_rounds(files, trial_id) if r <= name])

    stream = PairStream(
        documents.read(stream_start),
        pairs,
        hp.batch_size // context.get_world_size(),
        plan.seed,
        rank,
        give_up_after=documents.rows,
    )
    mask_rng = torch.Generator().manual_seed(plan.seed * 1000 + rank)
    window_terms, window_tokens, window_time = {}, 0, 0.0
    batches = Prefetched(build_batch, plan.steps)
    for step in range(start_step, plan.steps):
        began = time.perf_counter()
        n, batch = batches(step)
        inputs = {"input_ids": batch["input_ids"].to(device), "attention_mask": batch["attention_mask"].to(device)}
        tokens = int(batch["attention_mask"].sum())
        if with_mlm:
            inputs |= _mlm_inputs(batch, n, tokenizer, mask_rng, device)
            tokens += int(batch["attention_mask"][:n].sum())
        for group in optimizer.param_groups:
            group["lr"] = hp.lr * lr_factor(step, plan.steps, hp.warmup_ratio)
        optimizer.zero_grad(set_to_none=True)
        if cached:
            loss, terms = cached_step(module, inputs, hp, chunk_size, autocast)
            all_reduce_gradients(module)
        else:
            with autocast:
                outputs = wrapped(**inputs)
            loss, terms = training_loss(hp, outputs)
            loss.backward()
        if fault_nan_at_step == step:
            loss = loss * float("nan")
        if not finite_everywhere(loss):
            # a diverged trial ends here, on every rank at once (a worker-group restart would only
            # diverge again); run_trial turns the record into the trial's error
            reporter.wait(step)
            reporter.close()
            if rank == 0:
                record_divergence(files, trial_id, step, loss.item())
                print(f"[{trial_id}] loss became {loss.item()} at step {step}; the trial ends")
            batches.close()
            return
        torch.nn.utils.clip_grad_norm_(module.parameters(), 1.0)
        optimizer.step()
        if step == start_step:  # this worker's start-up: the model, its documents, the first batch and step
            first_step_seconds = time.perf_counter() - started
        for name, value in terms.items():
            window_terms.setdefault(name, []).append(value)
        window_tokens += tokens
        window_time += time.perf_counter() - began
        reporter.poll(step + 1)

        if (step + 1) % plan.eval_every == 0 or step + 1 == plan.steps:
            eval_round += 1
            reporter.wait(step + 1)  # the previous round first: only the latest checkpoint may lack scores
            train_metrics = {
                "step": step + 1,
                "eval_round": eval_round,
                **_window_metrics(window_terms, window_tokens, window_time),
                "skipped_documents": stream.skipped,
                "first_step_seconds": first_step_seconds,
                "worker_peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,  # KiB on Linux
                **_peak_gpu_memory(device),
                **({"chunk_size": chunk_size} if cached else {}),  # GradCache's chunk (auto: as measured)
            }
            stream_positions = _gathered(dataclasses.astuple(stream.position(step)))
            staged = staging / step_name(step + 1)
            if rank == 0:
                save_checkpoint(
                    staged,
                    encoder=module.encoder,
                    full_model=module,
                    tokenizer=tokenizer,
                    optimizer=optimizer,
                    record=_record(plan, hp, trial_id, step + 1),
                    state={
                        "step": step + 1,
                        "eval_round": eval_round,
                        "train_metrics": train_metrics,
                        "stream_positions": stream_positions,  # each rank's (epoch, offset)
                    },
                )
            reporter.submit(staged, train_metrics, step + 1)
            window_terms, window_tokens, window_time = {}, 0, 0.0
    reporter.wait(plan.steps)
    reporter.close()
    batches.close()
    if rank == 0:  # every staged round was persisted by its report and deleted; the trial's folder goes too
        shutil.rmtree(staging, ignore_errors=True)


def _probed_chunk_size(module, tokenizer, plan: TrainPlan, hp: Hyperparameters, context, device, autocast, trial_id):
    """``chunk_size: auto``: the largest chunk that fits this worker (trainers.memory), the
    smallest over all ranks, so every rank runs the same chunks."""
    from trainers.memory import probe_chunk_size

    sequences = 2 * (hp.batch_size // context.get_world_size())  # both views of each pair
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
        print(f"[{trial_id}] chunk_size auto: {int(chunk.item())} ({probe.describe()} on rank 0)")
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


def _window_metrics(terms: dict[str, list[float]], tokens: int, seconds: float) -> dict[str, float]:
    """A round's training metrics: each loss term's mean over its steps, the tokens per second
    (every rank's tokens over rank 0's time) and the steps' time itself."""
    return {
        **{name: sum(values) / len(values) for name, values in terms.items()},
        "tokens_per_s": tokens * world_size() / max(seconds, 1e-9),
        "train_seconds": seconds,  # this round's training steps (rank 0's clock)
    }


def _record(plan: TrainPlan, hp: Hyperparameters, trial_id: str, step: int) -> dict:
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


def _peak_gpu_memory(device: torch.device) -> dict[str, float]:
    """The round's GPU memory high-water mark (allocator, MiB), reset for the next round; on the
    CPU nothing (the resident set is the process's, not the step's)."""
    if device.type != "cuda":
        return {}
    peak = torch.cuda.max_memory_allocated(device) / MIB
    torch.cuda.reset_peak_memory_stats(device)
    return {"gpu_peak_mib": peak}
