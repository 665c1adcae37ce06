"""The cached contrastive loss gives the plain loss's gradients, with any chunk size."""

from __future__ import annotations

import pytest
import torch

from doctune_core.encoder import tokenize
from trainers.grad_cache import cached_step
from trainers.losses import mask_tokens
from trainers.model import build_module
from trainers.settings import TrialSettings
from trainers.training_loss import training_loss

TEXTS = [
    f"document number {i} talks about {topic}"
    for i, topic in enumerate(["rain", "elections", "markets", "football", "music", "science", "trade", "health"])
]


NEGATIVES = [f"another document, on {topic}" for topic in ["weather", "votes", "prices", "sport"]]
ANCHORS = ["a short text", "a title of a few words", "one sentence on the harbour"]


def _inputs(tokenizer, with_mlm: bool, hard_negatives: int = 0, anchors: bool = False) -> dict[str, torch.Tensor]:
    """Four pairs (views A, then views B), each pair's ``hard_negatives``, the anchor term's texts
    and targets (any vectors: the gradients are compared, not the targets' meaning) and the MLM term's inputs."""
    batch = tokenize(tokenizer, TEXTS + NEGATIVES[: 4 * hard_negatives] + (ANCHORS if anchors else []), 32)
    inputs = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
    if with_mlm:
        masked, labels = mask_tokens(
            batch["input_ids"][:4],
            batch["special_tokens_mask"][:4] | (1 - batch["attention_mask"][:4]),
            tokenizer.mask_token_id,
            len(tokenizer),
            torch.Generator().manual_seed(0),
        )
        inputs |= {"mlm_input_ids": masked, "mlm_labels": labels, "mlm_attention_mask": batch["attention_mask"][:4]}
    if anchors:
        inputs["anchor_targets"] = torch.randn(len(ANCHORS), 384, generator=torch.Generator().manual_seed(1))
    return inputs


def _grads(module) -> dict[str, torch.Tensor]:
    return {name: p.grad.clone() for name, p in module.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("chunk_size", [1, 3, 8])
@pytest.mark.parametrize(
    "hp",
    [
        TrialSettings(mlm_weight=0.0, temperature=0.1),
        TrialSettings(mlm_weight=0.1, loss="ntxent", bregman_weight=1.0, bregman_k=4),
        TrialSettings(mlm_weight=0.1, temperature=0.1, hard_negatives=1, anchor_weight=2.0),
    ],
    ids=["infonce", "ntxent+mlm+bregman", "infonce+hard-negatives+anchor+mlm"],
)
def test_cached_gradients_equal_the_plain_ones(minilm_with_mlm_head, hp, chunk_size):
    module, tokenizer = build_module(minilm_with_mlm_head, hp)
    module.eval()  # no dropout: the plain single forward and the chunked forwards see the same network
    inputs = _inputs(tokenizer, hp.mlm_weight > 0, hp.hard_negatives, anchors=hp.anchor_weight > 0)
    loss, _ = training_loss(hp, module(**inputs))
    loss.backward()
    plain = _grads(module)
    module.zero_grad(set_to_none=True)
    cached_loss, terms = cached_step(module, inputs, hp, chunk_size)
    cached = _grads(module)
    assert cached_loss.item() == pytest.approx(loss.item(), rel=1e-5)
    assert terms["loss"] == pytest.approx(loss.item(), rel=1e-5)
    assert plain.keys() == cached.keys() and len(plain) > 50
    for name in plain:
        # float32 sums in another order differ by about 1e-6 of a tensor's largest gradient (2.3e-6 seen on a
        # value projection whose gradients reach 0.72): the absolute tolerance follows each tensor's scale
        scale = float(plain[name].abs().max())
        torch.testing.assert_close(cached[name], plain[name], rtol=1e-4, atol=max(1e-6, 1e-5 * scale), msg=name)


def test_dropout_is_replayed_so_the_gradients_are_exact_in_train_mode(minilm_dir):
    hp = TrialSettings(mlm_weight=0.0, recipe="simcse")
    module, tokenizer = build_module(minilm_dir, hp)
    inputs = _inputs(tokenizer, False)
    chunk = 3
    torch.manual_seed(123)  # reference: the same chunked forwards, all with a graph
    pieces = [
        module.embed(inputs["input_ids"][i : i + chunk], inputs["attention_mask"][i : i + chunk])
        for i in range(0, 8, chunk)
    ]
    training_loss(hp, {"embeddings": torch.cat(pieces)})[0].backward()
    reference = _grads(module)
    module.zero_grad(set_to_none=True)
    torch.manual_seed(123)
    cached_step(module, inputs, hp, chunk)
    for name, grad in _grads(module).items():
        torch.testing.assert_close(grad, reference[name], rtol=1e-4, atol=1e-6, msg=name)


def _rank_gradients(rank: int, size: int, port: int, model_dir: str, hp, out) -> None:
    """One data-parallel worker of ``size``: its share of the pairs (views A then B, as a trial's
    batch) through the cached step and the gradients' all-reduce, then through the plain step under
    DDP; its averaged gradients of each into ``out[rank, "gradcache"]`` and ``out[rank, "ddp"]``."""
    import os

    import torch.distributed as dist

    from trainers.grad_cache import all_reduce_gradients

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=size)
    torch.set_num_threads(1)
    module, tokenizer = build_module(model_dir, hp)
    module.eval()  # no dropout: every split of the batch sees the same network
    pairs = len(TEXTS) // 2 // size
    mine = slice(rank * pairs, (rank + 1) * pairs)
    batch = tokenize(tokenizer, TEXTS[:4][mine] + TEXTS[4:][mine], 32)
    inputs = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
    cached_step(module, inputs, hp, chunk_size=1)
    all_reduce_gradients(module)
    out[rank, "gradcache"] = _grads(module)
    module.zero_grad(set_to_none=True)
    wrapped = torch.nn.parallel.DistributedDataParallel(module)
    training_loss(hp, wrapped(**inputs))[0].backward()
    out[rank, "ddp"] = _grads(module)
    dist.destroy_process_group()


@pytest.mark.slow  # four worker processes, each loading the encoder
def test_four_workers_give_one_workers_gradients(minilm_dir):
    """A trial fitted to 4 workers keeps the global batch and its in-batch negatives: each rank's
    quarter of the pairs, the contrastive loss over every rank's embeddings, the gradients averaged,
    give the one-worker gradients of the whole batch (GradCache's and DDP's paths alike)."""
    import socket

    import torch.multiprocessing as mp

    hp = TrialSettings(mlm_weight=0.0, temperature=0.05)
    module, tokenizer = build_module(minilm_dir, hp)
    module.eval()
    inputs = _inputs(tokenizer, with_mlm=False)
    training_loss(hp, module(**inputs))[0].backward()
    one_worker = _grads(module)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    out = mp.Manager().dict()
    mp.spawn(_rank_gradients, args=(4, port, minilm_dir, hp, out), nprocs=4, join=True)
    assert len(one_worker) > 50
    for (rank, path), gradients in out.items():
        assert gradients.keys() == one_worker.keys(), (rank, path)
        for name, grad in one_worker.items():
            torch.testing.assert_close(gradients[name], grad, rtol=1e-4, atol=1e-5, msg=f"{path}, rank {rank}: {name}")
    assert len(out) == 8
