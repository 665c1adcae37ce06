from __future__ import annotations

import math
import os
import socket

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from trainers.distributed import gather, world_size
from trainers.losses import info_nce, mask_tokens


def test_info_nce_matches_a_hand_computed_value():
    a = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    b = torch.tensor([[1.0, 0.0], [1.0, 1.0]])
    tau = 0.5
    # cosines: a0.b0 = 1, a0.b1 = 1/sqrt2, a1.b0 = 0, a1.b1 = 1/sqrt2
    c = 1 / math.sqrt(2)
    row0 = -math.log(math.exp(1 / tau) / (math.exp(1 / tau) + math.exp(c / tau)))
    row1 = -math.log(math.exp(c / tau) / (math.exp(0) + math.exp(c / tau)))
    assert info_nce(a, b, tau).item() == pytest.approx((row0 + row1) / 2, rel=1e-6)
    col0 = -math.log(math.exp(1 / tau) / (math.exp(1 / tau) + math.exp(0)))
    col1 = -math.log(math.exp(c / tau) / (math.exp(c / tau) + math.exp(c / tau)))
    expected = ((row0 + row1) / 2 + (col0 + col1) / 2) / 2
    assert info_nce(a, b, tau, symmetric=True).item() == pytest.approx(expected, rel=1e-6)


def test_info_nce_is_lower_for_aligned_pairs_and_rejects_bad_shapes():
    torch.manual_seed(0)
    a = torch.randn(8, 16)
    assert info_nce(a, a + 0.01 * torch.randn(8, 16), 0.05) < info_nce(a, torch.randn(8, 16), 0.05)
    with pytest.raises(ValueError, match="equal shape"):
        info_nce(a, a[:4], 0.05)


def test_mask_tokens_follows_the_bert_rule():
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(5, 1000, (64, 128))
    special = torch.zeros_like(ids)
    special[:, 0] = 1
    masked, labels = mask_tokens(ids, special, mask_token_id=3, vocab_size=1000, generator=generator)
    picked = labels != -100
    assert not picked[:, 0].any()  # special tokens are never picked
    assert abs(picked.float().mean().item() - 0.15) < 0.01
    assert torch.equal(labels[picked], ids[picked])
    share_masked = (masked[picked] == 3).float().mean().item()
    share_kept = (masked[picked] == ids[picked]).float().mean().item()
    assert abs(share_masked - 0.8) < 0.03 and abs(share_kept - 0.1) < 0.03
    assert torch.equal(masked[~picked], ids[~picked])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _distributed_grad(rank: int, size: int, port: int, weight: torch.Tensor, xa, xb, out) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=size)
    torch.set_num_threads(1)
    w = weight.clone().requires_grad_(True)
    n = xa.shape[0] // size
    local = slice(rank * n, (rank + 1) * n)
    loss = info_nce(gather(xa[local] @ w), gather(xb[local] @ w), 0.1, symmetric=True) * world_size()
    loss.backward()
    dist.all_reduce(w.grad)  # what DDP does, up to its division by world size
    out[rank] = w.grad / size
    dist.destroy_process_group()


def test_gather_keeps_the_local_gradient_and_matches_the_full_batch_gradient():
    torch.manual_seed(0)
    weight, xa, xb = torch.randn(6, 4), torch.randn(8, 6), torch.randn(8, 6)
    w = weight.clone().requires_grad_(True)
    info_nce(xa @ w, xb @ w, 0.1, symmetric=True).backward()
    manager = mp.Manager()
    out = manager.dict()
    mp.spawn(_distributed_grad, args=(2, _free_port(), weight, xa, xb, out), nprocs=2, join=True)
    for rank in (0, 1):
        torch.testing.assert_close(out[rank], w.grad, rtol=1e-5, atol=1e-6)


def test_gather_is_identity_without_a_process_group():
    x = torch.randn(3, 2)
    assert gather(x) is x and world_size() == 1
