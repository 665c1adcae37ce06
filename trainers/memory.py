"""The largest GradCache chunk that fits a worker's memory, found by measuring.

``train.chunk_size: auto`` makes every worker, before its first step, run the cached loss's
costliest pass (forward and backward of ``c`` full-length sequences through the encoder, and
through the MLM head when the trial uses one) at two sizes (``PROBE_SIZES``) and read the peak
memory of each: on a GPU from the CUDA allocator's peak counter, on CPU (Linux) from the
process's resident high-water mark, reset before each pass (``/proc/self/clear_refs``) after
freed memory is handed back (``malloc_trim``). Peak memory is linear in ``c`` (activations per
sequence, plus what does not depend on ``c``: gradients, workspace), so two points give

    chunk = floor((budget - fixed) / per_sequence)

where the budget is 90% of the GPU's free memory (80% of the node's available RAM on CPU, shared
by the node's workers) less the AdamW moments the first step will allocate. On a GPU the chosen
size is then run once, and halved until it fits. All ranks take the smallest answer. The chunk
never exceeds the sequences a worker embeds per step (more would not save anything).
"""

from __future__ import annotations

import ctypes
import math
from dataclasses import dataclass
from pathlib import Path

import torch

MIB = 2**20
GPU_SHARE, RAM_SHARE = 0.9, 0.8  # of free GPU memory / available RAM a worker may plan to use
# chunk sizes measured: the CUDA allocator's counter is exact at any size; on CPU, glibc serves
# small passes partly from memory it already holds, so the line is drawn through larger ones
# (measured on MiniLM at 128 tokens: 2 -> 4 adds 55-67 MiB per sequence, 4 -> 8 and 8 -> 16 add 97)
PROBE_SIZES = {"cuda": (2, 4), "cpu": (4, 8)}


@dataclass(frozen=True)
class ChunkProbe:
    chunk_size: int
    per_sequence_mib: float  # peak memory each further sequence in a chunk adds
    fixed_mib: float  # peak memory of a pass that does not grow with the chunk
    budget_mib: float

    def describe(self) -> str:
        return (
            f"chunk of {self.chunk_size} sequences: {self.per_sequence_mib:.0f} MiB per sequence + "
            f"{self.fixed_mib:.0f} MiB, budget {self.budget_mib:.0f} MiB"
        )


def _proc_status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise OSError(f"/proc/self/status has no {field}")


def peak_mib(run, device: torch.device) -> float:
    """Peak memory (MiB) that ``run()`` adds on ``device``."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        run()
        torch.cuda.synchronize(device)
        return (torch.cuda.max_memory_allocated(device) - before) / MIB
    ctypes.CDLL("libc.so.6").malloc_trim(0)  # freed blocks back to the OS, so they count again
    Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current resident size
    before = _proc_status_kib("VmRSS")
    run()
    return (_proc_status_kib("VmHWM") - before) / 1024


def budget_mib(module: torch.nn.Module, device: torch.device, workers_on_node: int) -> float:
    """Memory a worker may plan to fill, less the AdamW moments its first step will allocate."""
    if device.type == "cuda":
        free = torch.cuda.mem_get_info(device)[0] / MIB * GPU_SHARE
    else:
        meminfo = Path("/proc/meminfo").read_text().split("\n")
        available_kib = next(int(line.split()[1]) for line in meminfo if line.startswith("MemAvailable:"))
        free = available_kib / 1024 * RAM_SHARE / max(1, workers_on_node)
    moments = 2 * sum(p.numel() * p.element_size() for p in module.parameters() if p.requires_grad) / MIB
    return free - moments


def chunk_for(budget: float, fixed: float, per_sequence: float, limit: int) -> int:
    """The largest chunk whose linear cost fits ``budget``, between 1 and ``limit``."""
    if per_sequence <= 0:
        return limit
    return max(1, min(limit, math.floor((budget - fixed) / per_sequence)))


def chunk_pass(module, vocab_size: int, max_length: int, device: torch.device, size: int, autocast=None) -> None:
    """The cached loss's costliest pass over one chunk of ``size`` full-length sequences: forward
    and backward through the encoder, and through the MLM head when the trial has one."""
    from contextlib import nullcontext

    autocast = autocast or nullcontext()
    generator = torch.Generator().manual_seed(size)
    ids = torch.randint(1000, vocab_size, (size, max_length), generator=generator).to(device)
    mask = torch.ones_like(ids)
    with autocast:
        embeddings = module.embed(ids, mask)
    embeddings.float().sum().backward()
    del embeddings
    if module.with_mlm:
        labels = torch.where(torch.rand(ids.shape, generator=generator).to(device) < 0.15, ids, -100)
        with autocast:
            loss = module.mlm_loss(ids, mask, labels)
        loss.backward()
    module.zero_grad(set_to_none=True)


def probe_chunk_size(
    module,
    vocab_size: int,
    max_length: int,
    device: torch.device,
    limit: int,
    workers_on_node: int = 1,
    autocast=None,
    budget: float | None = None,
) -> ChunkProbe:
    """Measure the cached loss's chunk cost on this worker and choose the chunk size (see the module
    docstring). ``module`` is the trial's ``ContrastiveModel``, on ``device``, in train mode."""
    run = lambda size: chunk_pass(module, vocab_size, max_length, device, size, autocast)  # noqa: E731
    small, large = PROBE_SIZES["cuda" if device.type == "cuda" else "cpu"]
    low, high = peak_mib(lambda: run(small), device), peak_mib(lambda: run(large), device)
    per_sequence = max(0.0, (high - low) / (large - small))
    fixed = max(0.0, low - small * per_sequence)
    budget = budget_mib(module, device, workers_on_node) if budget is None else budget
    chunk = chunk_for(budget, fixed, per_sequence, limit)
    if device.type == "cuda":  # the allocator can say for sure: run it, halve until it fits
        while True:
            try:
                run(chunk)
                break
            except torch.cuda.OutOfMemoryError:
                module.zero_grad(set_to_none=True)
                torch.cuda.empty_cache()
                if chunk == 1:
                    raise
                chunk //= 2
    return ChunkProbe(chunk, per_sequence, fixed, budget)
