"""The per-worker masked-LM training loop of the base stage (a Ray Train worker runs it).

Every rank loads the same initial model from the work directory (on a node that does not see the
driver's, its copy fetched through the run's files: ``trainers.base_stage.staging``), wraps it in DDP
the way trials do, and trains on the packed token blocks. The global batch of step *s* (which blocks, which
tokens are masked) depends only on (seed, *s*), never on the number of workers: each rank builds
it and takes its slice. A restarted worker group or a resumed stage therefore goes on from the
latest checkpoint with the batches it would have seen. Rank 0 writes the checkpoints (``trainers.checkpoint``) and
TensorBoard scalars, and uploads both to the run's files where the stage goes through them; every
rank reports the same metrics to Ray Train.
"""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn

from doctune_core.encoder import bf16_autocast, load_encoder
from doctune_core.run_files import RunFiles
from trainers.base_stage import staging
from trainers.base_stage.staging import BLOCKS_FILE, CHECKPOINTS_DIR, DIVERGED_FILE, INIT_DIR, TENSORBOARD_DIR
from trainers.checkpoint import STEP_PREFIX, latest_step_dir, load_training_state, save_checkpoint
from trainers.config import BaseSettings
from trainers.distributed import finite_everywhere, training_device
from trainers.losses import mask_tokens, masked_lm_loss
from trainers.schedule import lr_factor

log = logging.getLogger(f"doctune.{__name__}")

WEIGHT_DECAY = 0.01  # BERT, Appendix A.2
LOG_EVERY = 10  # steps per logged loss (fewer in a run of under 100 steps)


@dataclass(frozen=True)
class BasePlan:
    """What every worker of one base-stage run needs."""

    work_dir: str  # the cache entry's work directory (init/, blocks.npy, checkpoints/)
    settings: BaseSettings
    digest: str
    record: dict  # what the finished model says about itself (doctune.json), before training metrics
    threads_per_worker: int
    bf16: bool
    # the run's files the work goes through, for nodes that may not see ``work_dir`` (None: all do)
    through: RunFiles | None = None

    @property
    def log_every(self) -> int:
        return max(1, min(LOG_EVERY, self.settings.steps // 10))


class MaskedLM(nn.Module):
    """A ``BertForMaskedLM``'s loss through one ``forward``, so DDP synchronises it; the vocabulary
    projection only at the masked positions (``trainers.losses.masked_lm_loss``)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return masked_lm_loss(self.model, input_ids, attention_mask, labels)


class BlockStream:
    """The global batches: step *s* takes slots ``s * batch_size ...`` of a per-epoch permutation of
    the blocks (seeded by (seed, epoch)), and masks them with a generator seeded by (seed, *s*)."""

    def __init__(self, blocks: np.ndarray, settings: BaseSettings, tokenizer) -> None:
        self.blocks, self.settings, self.tokenizer = blocks, settings, tokenizer
        self.special_ids = torch.tensor(tokenizer.all_special_ids)
        self._order: tuple[int, np.ndarray] | None = None

    def _permutation(self, epoch: int) -> np.ndarray:
        if self._order is None or self._order[0] != epoch:
            self._order = (epoch, np.random.default_rng([self.settings.seed, epoch]).permutation(len(self.blocks)))
        return self._order[1]

    def input_ids(self, step: int) -> torch.Tensor:
        rows = []
        for j in range(self.settings.batch_size):
            epoch, offset = divmod(step * self.settings.batch_size + j, len(self.blocks))
            rows.append(self.blocks[self._permutation(epoch)[offset]])
        return torch.from_numpy(np.stack(rows).astype(np.int64))

    def batch(self, step: int) -> dict[str, torch.Tensor]:
        """Step ``step``'s global batch with BERT's masking applied."""
        input_ids = self.input_ids(step)
        special = torch.isin(input_ids, self.special_ids)
        generator = torch.Generator().manual_seed(self.settings.seed * 1_000_003 + step)
        tokenizer = self.tokenizer
        masked, labels = mask_tokens(input_ids, special, tokenizer.mask_token_id, len(tokenizer), generator)
        attention_mask = (input_ids != tokenizer.pad_token_id).long()
        return {"input_ids": masked, "attention_mask": attention_mask, "labels": labels}


def train_loop_per_worker(config: dict) -> None:
    import ray.train
    import ray.train.torch

    plan: BasePlan = config["plan"]
    settings, work = plan.settings, Path(plan.work_dir)
    if plan.through is not None:
        work = staging.work_on_this_node(plan.through, work, plan.digest)
    torch.set_num_threads(plan.threads_per_worker)
    context = ray.train.get_context()
    rank, share = context.get_world_rank(), settings.batch_size // context.get_world_size()
    torch.manual_seed(settings.seed * 1000 + rank)  # dropout differs per rank
    device = training_device()

    model, tokenizer = load_encoder(str(work / INIT_DIR), with_mlm_head=True)
    model.train()  # from_pretrained returns eval mode
    stream = BlockStream(np.load(work / BLOCKS_FILE, mmap_mode="r"), settings, tokenizer)
    wrapped = ray.train.torch.prepare_model(MaskedLM(model), move_to_device=device, parallel_strategy="ddp")
    optimizer = torch.optim.AdamW(model.parameters(), lr=settings.lr, weight_decay=WEIGHT_DECAY)
    autocast = bf16_autocast(device, plan.bf16)

    start_step, curve = 0, []
    latest = latest_step_dir(work / CHECKPOINTS_DIR)
    if latest is not None:
        state = load_training_state(latest, model, optimizer)
        start_step, curve = state["step"], state["loss_curve"]
        if rank == 0:
            log.info(f"[base {plan.digest}] resumed from {latest.name} (step {start_step})")
    window = {"loss": 0.0, "steps": 0, "tokens": 0, "seconds": 0.0}
    with _tensorboard(work) if rank == 0 else contextlib.nullcontext() as writer:
        for step in range(start_step, settings.steps):
            began = time.perf_counter()
            batch = stream.batch(step)
            local = {k: v[rank * share : (rank + 1) * share].to(device) for k, v in batch.items()}
            for group in optimizer.param_groups:
                group["lr"] = settings.lr * lr_factor(step, settings.steps, settings.warmup_ratio)
            optimizer.zero_grad(set_to_none=True)
            with autocast:
                loss = wrapped(**local)
            loss.backward()
            if not finite_everywhere(loss):  # every rank stops here together; the stage reports why
                if rank == 0:
                    record = {"step": step, "loss": str(loss.item())}
                    (work / DIVERGED_FILE).write_text(json.dumps(record))
                    if plan.through is not None:
                        staging.record_divergence(plan.through, plan.digest, record)
                return
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            step_loss = _mean_over_ranks(loss.detach())
            window["loss"] += step_loss
            window["steps"] += 1
            window["tokens"] += int(batch["attention_mask"].sum())
            window["seconds"] += time.perf_counter() - began

            done = step + 1
            if done % plan.log_every == 0 or done == settings.steps:
                curve.append([done, window["loss"] / window["steps"]])
                if writer is not None:
                    writer.add_scalar("base/mlm_loss", curve[-1][1], done)
                    writer.add_scalar("base/lr", optimizer.param_groups[0]["lr"], done)
                    writer.add_scalar("base/tokens_per_s", window["tokens"] / max(window["seconds"], 1e-9), done)
                    writer.flush()
                window = dict.fromkeys(window, 0)
            if done % settings.checkpoint_every == 0 or done == settings.steps:
                if rank == 0:
                    saved = _checkpoint(work, model, tokenizer, optimizer, plan, done, curve)
                    if plan.through is not None:
                        writer.flush()
                        staging.upload_checkpoint(plan.through, plan.digest, work, saved)
                    log.info(f"[base {plan.digest}] step {done}/{settings.steps} mlm loss {step_loss:.4f}")
                ray.train.report({"step": done, "mlm_loss": step_loss})


def _checkpoint(work: Path, model, tokenizer, optimizer, plan: BasePlan, step: int, curve: list) -> Path:
    """Save step ``step`` (an ordinary model directory with its training state), drop older ones, and
    return where it was saved."""
    root = work / CHECKPOINTS_DIR
    target = save_checkpoint(
        root / f"{STEP_PREFIX}{step:06d}",
        encoder=model,  # the whole masked-LM model, so trials with an MLM term start from a trained head
        full_model=model,
        tokenizer=tokenizer,
        optimizer=optimizer,
        record={**plan.record, "step": step, "loss_curve": curve, "settings": asdict(plan.settings)},
        state={"step": step, "loss_curve": curve},
    )
    for older in root.glob(f"{STEP_PREFIX}*"):
        if older != target:
            shutil.rmtree(older, ignore_errors=True)
    return target


def _mean_over_ranks(value: torch.Tensor) -> float:
    value = value.float().reshape(1).clone()
    if dist.is_initialized():
        dist.all_reduce(value)
        value /= dist.get_world_size()
    return float(value.item())


def _tensorboard(work: Path):
    from torch.utils.tensorboard import SummaryWriter

    return SummaryWriter(str(work / TENSORBOARD_DIR))
