"""The base stage: a vanilla (MLM-only) BERT made from scratch on a search's corpus, once.

``ensure_base(settings, corpus_path, ...)`` returns the model directory for (corpus content,
settings). When the cache holds it, nothing is trained. Otherwise it trains a WordPiece
vocabulary on the corpus (``tokenizers``), packs the corpus into blocks of ``max_length`` tokens,
saves the initial weights, and runs the masked-LM training as a Ray Train job
(``trainers.base_stage.loop``) with the trials' resources.

Cache layout under ``<cache>/bases/``::

    <digest>/             the finished model: config.json, model.safetensors, tokenizer files,
                          doctune.json (settings, corpus, loss curve), tensorboard/
    <digest>.partial/     work in progress: init/, blocks.npy, checkpoints/, Ray Train storage
    <digest>.lock         held by the process that builds the entry

The finished directory appears by one rename, so a directory named ``<digest>`` is always
complete. A crash leaves only ``<digest>.partial``, and the next attempt resumes from its latest
checkpoint; two processes asking for the same base at once build it once. ``through``: the files of
a run kept at a storage URI, through which the workers receive the work and return its checkpoints,
so that no node need see this machine's cache, and a stage resumes from the run's files alone
(``trainers.base_stage.staging``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from doctune_core.data.atomic import exclusive_lock
from doctune_core.data.corpus import PreparedCorpus
from doctune_core.data.wheels import cache_dir
from doctune_core.logs import library_log_level
from doctune_core.run_files import RunFiles
from trainers.base_stage import staging
from trainers.base_stage.loop import BasePlan, train_loop_per_worker
from trainers.base_stage.staging import BLOCKS_FILE, CHECKPOINTS_DIR, DIVERGED_FILE, INIT_DIR, TENSORBOARD_DIR
from trainers.checkpoint import STEP_PREFIX, latest_step_dir
from trainers.config import BaseSettings
from trainers.distributed import collective_backend

log = logging.getLogger(f"doctune.{__name__}")

FORMAT_VERSION = 1  # bump when what the stage trains changes for the same settings
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
KEY_EXCLUDES = ("checkpoint_every",)  # settings that do not change the trained weights


class BaseStageFailed(RuntimeError):
    """The base could not be trained; the message says why and what to change."""


@dataclass(frozen=True)
class BaseResult:
    path: Path  # the finished model directory
    digest: str
    trained: bool  # False when the cache already held it


def corpus_digest(corpus_path: str | Path) -> str:
    """sha256 of a prepared corpus's shards (recorded in its manifest)."""
    return PreparedCorpus.load(corpus_path).digest


def base_digest(settings: BaseSettings, corpus_path: str | Path) -> str:
    """The cache key: the corpus content and every setting that changes the weights."""
    key = {k: v for k, v in asdict(settings).items() if k not in KEY_EXCLUDES}
    ident = {"format": FORMAT_VERSION, "corpus": corpus_digest(corpus_path), "settings": key}
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:20]


def base_entry(settings: BaseSettings, corpus_path: str | Path, cache: Path | None = None) -> Path:
    """Where the finished base for these settings and corpus lives (whether or not it exists yet)."""
    return (cache or cache_dir()) / "bases" / base_digest(settings, corpus_path)


def ensure_base(
    settings: BaseSettings,
    corpus_path: str | Path,
    corpus_name: str,
    *,
    workers: int = 1,
    cpus_per_worker: float = 1.0,
    gpus_per_worker: float = 0.0,
    bf16: bool = False,
    max_worker_failures: int = 2,
    cache: Path | None = None,
    logs_to: Path | None = None,
    through: RunFiles | None = None,
) -> BaseResult:
    """The finished base model directory, trained now unless the cache has it.

    ``logs_to``: a directory that receives a copy of the stage's TensorBoard events (a search's
    run directory, so ``tensorboard --logdir RUN_DIR`` shows the base's MLM loss beside the trials).
    ``through``: a run's files the work goes through (nothing where they are this machine's
    directory: its nodes then share the driver's file system).
    """
    if through is not None and through.local:
        through = None
    if settings.batch_size % workers:
        raise ValueError(f"base batch_size {settings.batch_size} is not a multiple of {workers} workers")
    entry = base_entry(settings, corpus_path, cache)
    trained = False
    if not entry.is_dir():  # a complete entry only ever appears by a rename: reading one needs no lock
        entry.parent.mkdir(parents=True, exist_ok=True)
        with exclusive_lock(entry):
            work = entry.with_name(entry.name + ".partial")
            if entry.is_dir():  # another process finished it meanwhile
                shutil.rmtree(work, ignore_errors=True)
            else:
                began = time.perf_counter()
                log.info(
                    f"doctune: base {settings.label}: training a {settings.vocab_size}-word WordPiece vocabulary "
                    f"and a {settings.layers}-layer BERT (hidden {settings.hidden}) for {settings.steps} MLM steps "
                    f"on {corpus_name!r} into {entry}"
                )
                plan = BasePlan(
                    work_dir=str(work),
                    settings=settings,
                    digest=entry.name,
                    record=_prepare(work, settings, corpus_path, corpus_name, entry.name),
                    threads_per_worker=max(1, math.floor(cpus_per_worker)),
                    bf16=bf16,
                    through=through,
                )
                if through is not None:
                    staging.upload_work(through, work, entry.name)
                _fit(plan, workers, cpus_per_worker, gpus_per_worker, max_worker_failures)
                _finish(work, entry, settings.steps, time.perf_counter() - began, workers)
                if through is not None:
                    staging.remove(through, entry.name)
                trained = True
    if not trained:
        log.info(f"doctune: base {settings.label}: reusing {entry}")
    if logs_to is not None and (entry / TENSORBOARD_DIR).is_dir():
        shutil.copytree(entry / TENSORBOARD_DIR, logs_to / TENSORBOARD_DIR, dirs_exist_ok=True)
    return BaseResult(entry, entry.name, trained)


def _documents(corpus_path: str | Path) -> Iterator[str]:
    """The prepared corpus's documents as plain text, one at a time."""
    for sentences in PreparedCorpus.load(corpus_path).documents():
        yield " ".join(sentences)


def train_tokenizer(texts: Iterator[str], vocab_size: int, lowercase: bool, max_length: int):
    """A BERT-style WordPiece tokenizer trained on ``texts`` ([CLS] text [SEP], ## continuations),
    as a transformers tokenizer."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import BertTokenizer

    backend = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    backend.normalizer = normalizers.BertNormalizer(lowercase=lowercase, strip_accents=lowercase)
    backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    backend.decoder = decoders.WordPiece()
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=list(SPECIAL_TOKENS), show_progress=False)
    backend.train_from_iterator(texts, trainer)
    cls, sep = backend.token_to_id("[CLS]"), backend.token_to_id("[SEP]")
    backend.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)],
    )
    return BertTokenizer(
        tokenizer_object=backend,
        do_lower_case=lowercase,
        strip_accents=lowercase,
        unk_token="[UNK]",
        sep_token="[SEP]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        mask_token="[MASK]",
        model_max_length=max_length,
    )


def pack_blocks(
    tokenizer, texts: Iterator[str], max_length: int, chunk: int = 512, max_blocks: int | None = None
) -> np.ndarray:
    """The corpus as ``(blocks, max_length)`` int32 token ids: documents joined with [SEP] and cut
    into consecutive runs of ``max_length - 2`` tokens, each framed as [CLS] ... [SEP] (RoBERTa's
    FULL-SENTENCES packing, Liu et al. 2019, Sec. 4.2: no padding, no text wasted). The last block
    is padded. ``max_blocks``: the first that many blocks only, read from the fewest chunks of
    ``chunk`` texts that fill them (a later call on the same iterator packs the texts after those)."""
    from tokenizers import Tokenizer

    backend = Tokenizer.from_str(tokenizer.backend_tokenizer.to_str())
    backend.no_padding()  # a published tokenizer may pad and cut every text (all-MiniLM-L6-v2: to 128 tokens)
    backend.no_truncation()
    sep = tokenizer.sep_token_id
    body = max_length - 2
    parts: list[np.ndarray] = []
    batch: list[str] = []
    packed = 0

    def flush() -> None:
        nonlocal packed
        for encoding in backend.encode_batch(batch, add_special_tokens=False):
            parts.append(np.asarray([*encoding.ids, sep], dtype=np.int32))
            packed += len(parts[-1])
        batch.clear()

    for text in texts:
        batch.append(text)
        if len(batch) == chunk:
            flush()
            if max_blocks is not None and packed >= max_blocks * body:
                break
    flush()
    flat = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int32)
    if max_blocks is not None:
        flat = flat[: max_blocks * body]
    count = max(1, -(-len(flat) // body))
    padded = np.full(count * body, tokenizer.pad_token_id, dtype=np.int32)
    padded[: len(flat)] = flat
    blocks = np.full((count, max_length), tokenizer.pad_token_id, dtype=np.int32)
    blocks[:, 0] = tokenizer.cls_token_id
    blocks[:, 1:-1] = padded.reshape(count, body)
    blocks[:, -1] = sep
    return blocks


def _prepare(work: Path, settings: BaseSettings, corpus_path: str | Path, corpus_name: str, digest: str) -> dict:
    """Write the tokenizer, the initial weights and the token blocks into ``work`` (each written
    whole or not at all, so a resumed attempt reuses what an earlier one finished), and return
    the record the finished model will carry."""
    import torch
    from transformers import BertConfig, BertForMaskedLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    work.mkdir(exist_ok=True)
    (work / DIVERGED_FILE).unlink(missing_ok=True)
    init = work / INIT_DIR
    if not init.is_dir():
        tokenizer = train_tokenizer(
            _documents(corpus_path), settings.vocab_size, settings.lowercase, settings.max_length
        )
        torch.manual_seed(settings.seed)
        config = BertConfig(
            vocab_size=len(tokenizer),
            hidden_size=settings.hidden,
            num_hidden_layers=settings.layers,
            num_attention_heads=settings.heads,
            intermediate_size=settings.intermediate,
            max_position_embeddings=settings.max_length,
            pad_token_id=tokenizer.pad_token_id,
        )
        model = BertForMaskedLM(config)
        partial = work / f"{INIT_DIR}.partial"
        shutil.rmtree(partial, ignore_errors=True)
        model.save_pretrained(partial, safe_serialization=True)
        tokenizer.save_pretrained(partial)
        os.replace(partial, init)
    blocks_file = work / BLOCKS_FILE
    if not blocks_file.exists():
        from transformers import AutoTokenizer

        blocks = pack_blocks(AutoTokenizer.from_pretrained(init), _documents(corpus_path), settings.max_length)
        partial_file = work / f"{BLOCKS_FILE}.partial"
        with partial_file.open("wb") as handle:
            np.save(handle, blocks)
        os.replace(partial_file, blocks_file)
    blocks = np.load(blocks_file, mmap_mode="r")
    config = json.loads((init / "config.json").read_text())
    return {
        "kind": "vanilla-base",
        "label": settings.label,
        "digest": digest,
        "corpus": corpus_name,
        "corpus_sha256": corpus_digest(corpus_path),
        "vocab_size": config["vocab_size"],
        "blocks": int(blocks.shape[0]),
    }


def _fit(plan: BasePlan, workers: int, cpus_per_worker: float, gpus_per_worker: float, max_failures: int) -> None:
    import ray.train
    from ray.train.torch import TorchConfig, TorchTrainer

    work, files = Path(plan.work_dir), plan.through
    # the loop resumes from its own checkpoints, not Ray's: Ray's state starts anew
    if files is None:
        storage, filesystem = str(work / "ray"), None
        shutil.rmtree(storage, ignore_errors=True)
    else:
        storage, filesystem = files.path(staging.staged(plan.digest, "ray")), files.filesystem
        files.delete_dir(staging.staged(plan.digest, "ray"))
    use_gpu = gpus_per_worker > 0
    resources = {"CPU": cpus_per_worker} | ({"GPU": gpus_per_worker} if use_gpu else {})
    trainer = TorchTrainer(
        train_loop_per_worker,
        train_loop_config={"plan": plan},
        scaling_config=ray.train.ScalingConfig(num_workers=workers, use_gpu=use_gpu, resources_per_worker=resources),
        torch_config=TorchConfig(backend=collective_backend(use_gpu)),
        run_config=ray.train.RunConfig(
            name=f"base-{plan.digest}",
            storage_path=storage,
            storage_filesystem=filesystem,
            failure_config=ray.train.FailureConfig(max_failures=max_failures, controller_failure_limit=3),
            logging_config=ray.train.LoggingConfig(log_level=library_log_level()),
        ),
    )
    try:
        trainer.fit()
    except Exception as err:
        raise BaseStageFailed(f"base stage: training failed ({type(err).__name__}: {err}); see the log above") from err
    if files is not None:
        staging.fetch_outcome(files, plan.digest, work)
    diverged = work / DIVERGED_FILE
    if diverged.exists():
        record = json.loads(diverged.read_text())
        diverged.unlink()
        raise BaseStageFailed(
            f"base stage: the MLM loss became {record['loss']} at step {record['step']}; lower base.lr"
        )


def _finish(work: Path, entry: Path, steps: int, seconds: float, workers: int) -> None:
    """Turn the final checkpoint into the finished model directory and rename it into place."""
    last = latest_step_dir(work / CHECKPOINTS_DIR)
    if last is None or last.name != f"{STEP_PREFIX}{steps:06d}":
        raise BaseStageFailed(f"base stage: training ended without its final checkpoint in {work / CHECKPOINTS_DIR}")
    final = work / "model"
    shutil.rmtree(final, ignore_errors=True)
    shutil.copytree(last, final, ignore=shutil.ignore_patterns("training_state"))
    record = json.loads((final / "doctune.json").read_text())
    record |= {"wall_seconds": round(seconds, 1), "workers": workers}  # of the attempt that finished it
    (final / "doctune.json").write_text(json.dumps(record, indent=2, sort_keys=True))
    if (work / TENSORBOARD_DIR).is_dir():
        shutil.copytree(work / TENSORBOARD_DIR, final / TENSORBOARD_DIR)
    os.replace(final, entry)
    shutil.rmtree(work, ignore_errors=True)
