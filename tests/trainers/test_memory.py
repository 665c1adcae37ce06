"""The chunk-size probe measures real peak memory on this machine and chooses within the budget."""

from __future__ import annotations

import pytest
import torch

from trainers.memory import chunk_for, chunk_pass, peak_mib, probe_chunk_size
from trainers.model import build_module
from trainers.settings import TrialSettings


def test_chunk_for_is_the_largest_linear_fit_within_limits():
    assert chunk_for(budget=1000, fixed=100, per_sequence=200, limit=64) == 4
    assert chunk_for(budget=1000, fixed=100, per_sequence=200, limit=3) == 3
    assert chunk_for(budget=50, fixed=100, per_sequence=200, limit=64) == 1  # never below one sequence
    assert chunk_for(budget=1000, fixed=100, per_sequence=0, limit=8) == 8


def test_peak_memory_is_measured_not_guessed():
    cpu = torch.device("cpu")
    small = peak_mib(lambda: torch.ones(16 * 2**20 // 4).sum(), cpu)  # a 16 MiB tensor
    large = peak_mib(lambda: torch.ones(128 * 2**20 // 4).sum(), cpu)  # a 128 MiB tensor
    assert 8 < small < 64 and 100 < large < 200


@pytest.mark.slow  # about 20 s
def test_probe_on_a_real_encoder_is_linear_and_respects_the_budget(minilm_with_mlm_head):
    module, tokenizer = build_module(minilm_with_mlm_head, TrialSettings(mlm_weight=0.1))
    cpu = torch.device("cpu")
    probe = probe_chunk_size(module, len(tokenizer), 128, cpu, limit=64)
    assert probe.per_sequence_mib > 1 and 1 <= probe.chunk_size <= 64
    assert all(p.grad is None for p in module.parameters())  # the probe leaves no gradients behind

    # the linear model predicts a larger chunk's measured peak
    predicted = probe.fixed_mib + 16 * probe.per_sequence_mib
    measured = peak_mib(lambda: chunk_pass(module, len(tokenizer), 128, cpu, 16), cpu)
    assert 0.7 * predicted < measured < 1.3 * predicted

    # a budget for about five sequences gives five (the same measurements, a set budget)
    tight = probe_chunk_size(module, len(tokenizer), 128, cpu, limit=64, budget=probe.fixed_mib + 5.5 * 60)
    assert tight.budget_mib == probe.fixed_mib + 5.5 * 60
    assert tight.chunk_size == chunk_for(tight.budget_mib, tight.fixed_mib, tight.per_sequence_mib, 64)
