"""What a dropout mask costs on the CPU, and what a cheaper draw of the same mask would save.

    .venv/bin/python bench/dropout_masks.py [--threads 2] [--repeats 7]

Dropout on attention probabilities draws one Bernoulli per element of a (batch, heads, length,
length) tensor: for all-MiniLM-L6-v2 at 256 tokens and 32 sequences (16 pairs) that is 25M draws
per layer, 151M per forward. The training step's profile puts ``aten::bernoulli_`` at about a fifth
of the step. Timed here on that tensor:

1. ``torch.nn.functional.dropout`` (what the encoder runs: ``bernoulli_`` then a multiply);
2. the same keep-probability from 16-bit slices of 64-bit random integers (four draws per RNG
   call, kept where the slice is at least a threshold: p = 6554 / 65536 = 0.100006) and a multiply;
3. a plain multiply by a ready mask (the floor: what any mask costs to apply).

Medians over repeats; prints Markdown for bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

SHAPE = (32, 12, 256, 256)
P = 0.1


def dropout_bernoulli(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.dropout(x, P, training=True)


def dropout_sliced_integers(x: torch.Tensor) -> torch.Tensor:
    words = torch.randint(-(2**63), 2**63 - 1, ((x.numel() + 3) // 4,), dtype=torch.int64)
    slices = words.view(torch.int16)[: x.numel()].view(x.shape)
    threshold = round(P * 65536) - 32768  # int16 slices are uniform on [-32768, 32767]
    return x * (slices >= threshold) * (1.0 / (1.0 - P))


def timed(fn, x: torch.Tensor, repeats: int) -> list[float]:
    fn(x)  # warm-up
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        fn(x)
        times.append(time.perf_counter() - began)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    x = torch.rand(SHAPE)
    ready = (torch.rand(SHAPE) >= P).to(x.dtype)
    kept = dropout_sliced_integers(x).ne(0).float().mean().item()
    rows = {
        "F.dropout (bernoulli_ + multiply)": timed(dropout_bernoulli, x, args.repeats),
        "16-bit slices of 64-bit integers + compare + multiply": timed(dropout_sliced_integers, x, args.repeats),
        "multiply by a ready mask (floor)": timed(lambda t: t * ready, x, args.repeats),
    }
    base = statistics.median(rows["F.dropout (bernoulli_ + multiply)"])
    import platform

    print("## Dropout masks (`bench/dropout_masks.py`)\n")
    print(
        f"- machine: {os.cpu_count()} CPUs, {platform.machine()}; torch {torch.__version__}, "
        f"{args.threads} threads; {time.strftime('%Y-%m-%d')}; tensor {SHAPE} fp32 (one layer's attention "
        f"probabilities, 32 sequences of 256 tokens, 12 heads); {args.repeats} repeats"
    )
    print(f"- keep rate of the sliced-integer mask: {kept:.4f} (target {1 - P:.4f})\n")
    print("| mask | ms (median) | runs (ms) | vs F.dropout |")
    print("|---|---|---|---|")
    for name, times in rows.items():
        median = statistics.median(times)
        runs = ", ".join(f"{t * 1e3:.0f}" for t in times)
        print(f"| {name} | {median * 1e3:.1f} | {runs} | {base / median:.2f}x |")


if __name__ == "__main__":
    main()
