"""A Longformer training step with doctune's attention (doctune_core/longformer_attention.py) against
Hugging Face's, at 512 to 4096 tokens.

    python bench/longformer_attention.py [--threads 2] [--rounds 3] [--steps 3] [--device cpu|cuda]
        [--bf16] [--lengths 512 ...] [--window 256] [--pairs 1]

One training step (forward, backward, AdamW) of the Longformer made from the embedded MiniLM
(window 256 by default, [CLS] global; the SimCSE objective of bench/long_documents.py), ``--pairs``
pairs (twice as many sequences) per step. ``--lengths 128 --window 64 --pairs 4 --threads 1`` is
one worker of the default search at ``--profile local``. ``--bf16`` runs the forward under bf16
autocast (on a GPU, or a CPU with bf16 instructions), as a trial with ``train.bf16`` does. Each
measurement runs in a fresh process: load the model, one warm-up step, then ``--steps`` timed steps,
each timed on the wall clock and in the process's CPU time (all its threads; time spent waiting for
a core does not count, so it moves less with other work). Memory is what the step itself needed: the
resident-memory high-water mark (Linux ``VmHWM``) above resident memory before the first step, or on
a GPU ``torch.cuda.max_memory_allocated`` above what was allocated before it. Rounds alternate which
implementation runs first; times are medians over every timed step of every round. Other work on the
machine slows both implementations, so the load average (/proc/loadavg, 1 minute) is recorded around
each measurement, and the share of time tasks waited for a CPU (/proc/pressure/cpu, 60 s) at the
start and the end. Prints Markdown for bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

from child import cpu_name, gpus, run_child  # bench/child.py, beside this script

ROOT = Path(__file__).resolve().parent.parent
LENGTHS = (512, 1024, 2048, 4096)
IMPLEMENTATIONS = ("hf", "doctune")


def _memory_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(field)


def load_average() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def cpu_pressure() -> str:
    """The share of the last minute some task waited for a CPU (Linux PSI), or "unknown"."""
    pressure = Path("/proc/pressure/cpu")
    if not pressure.exists():
        return "unknown"
    fields = dict(item.split("=") for item in pressure.read_text().splitlines()[0].split()[1:])
    return f"{float(fields['avg60']):.0f}%"


def measure(config: dict) -> dict:
    """Run in the child process."""
    import torch
    from transformers.models.longformer.modeling_longformer import LongformerSelfAttention

    sys.path.insert(0, str(ROOT))
    from doctune_core.data import cache_dir
    from doctune_core.encoder import bf16_autocast, resolve_model, tokenize
    from doctune_core.longformer import cached_longformer
    from doctune_core.longformer_attention import FusedLongformerSelfAttention
    from trainers.model import build_module
    from trainers.settings import TrialSettings
    from trainers.training_loss import training_loss

    torch.set_num_threads(config["threads"])
    device = torch.device(config["device"])
    model_dir = str(cached_longformer(resolve_model("all-minilm-l6-v2"), 4096, config["window"], cache_dir()))
    hp = TrialSettings(mlm_weight=0.0, recipe="simcse")
    module, tokenizer = build_module(model_dir, hp)  # doctune's loading point: its attention
    fused = [m for m in module.modules() if isinstance(m, FusedLongformerSelfAttention)]
    assert len(fused) == module.model.config.num_hidden_layers
    if config["attention"] == "hf":
        for attention in fused:
            attention.__class__ = LongformerSelfAttention
    module.to(device)
    optimizer = torch.optim.AdamW(module.parameters(), lr=1e-5)
    texts = ["lorem ipsum dolor sit amet " * (config["length"] // 4)] * (2 * config["pairs"])
    batch = tokenize(tokenizer, texts, config["length"])
    inputs = {"input_ids": batch["input_ids"].to(device), "attention_mask": batch["attention_mask"].to(device)}

    autocast = bf16_autocast(device, config["bf16"])

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        with autocast:
            loss = training_loss(hp, module(**inputs))[0]
        loss.backward()
        optimizer.step()
        if device.type == "cuda":
            torch.cuda.synchronize()

    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
    else:
        before = _memory_kib("VmRSS") * 1024
    step()
    times, cpu_times = [], []
    for _ in range(config["steps"]):
        began, began_cpu = time.perf_counter(), time.process_time()
        step()
        times.append(time.perf_counter() - began)
        cpu_times.append(time.process_time() - began_cpu)
    peak = torch.cuda.max_memory_allocated() if device.type == "cuda" else _memory_kib("VmHWM") * 1024
    tokens = int(batch["attention_mask"].sum())
    return {"times": times, "cpu_times": cpu_times, "mib": (peak - before) / 2**20, "tokens": tokens}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument(
        "--bf16", action="store_true", help="bf16 autocast, as train.bf16 (a GPU, or a CPU with bf16 instructions)"
    )
    parser.add_argument("--lengths", type=int, nargs="+", default=LENGTHS)
    parser.add_argument("--window", type=int, default=256, help="the attention window of the converted model")
    parser.add_argument("--pairs", type=int, default=1, help="positive pairs per step")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(json.loads(args.child))))
        return
    import torch
    import transformers

    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: no CUDA device is visible")
    from doctune_core.encoder import cpu_computes_bf16

    bf16 = args.bf16 and (args.device == "cuda" or cpu_computes_bf16())
    precision = " (bf16 autocast)" if bf16 else ""
    print(
        f"machine: {os.cpu_count()} CPUs ({cpu_name()}), {gpus()}; torch {torch.__version__}, transformers "
        f"{transformers.__version__}; device {args.device}{precision}, {args.threads} threads; {args.rounds} rounds x "
        f"{args.steps} timed steps per implementation and length, order alternating; window {args.window}, "
        f"{args.pairs} pair(s) per step; "
        f"{time.strftime('%Y-%m-%d %H:%M')}; load average at start {load_average():.2f}, CPU pressure "
        f"{cpu_pressure()}\n"
    )
    print(
        "| tokens per sequence | HF: s/step | doctune: s/step | speed-up | HF: tokens/s | doctune: tokens/s "
        "| HF: CPU s/step | doctune: CPU s/step | CPU-time speed-up | HF: step memory (MiB) "
        "| doctune: step memory (MiB) | load during (1-min avg) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for length in args.lengths:
        results: dict[str, list[dict]] = {name: [] for name in IMPLEMENTATIONS}
        loads = [load_average()]
        for round_ in range(args.rounds):
            for name in IMPLEMENTATIONS if round_ % 2 == 0 else IMPLEMENTATIONS[::-1]:
                config = {"attention": name, "length": length, "threads": args.threads, "steps": args.steps}
                config |= {"window": args.window, "pairs": args.pairs, "bf16": args.bf16}
                results[name].append(run_child(__file__, config | {"device": args.device}))
                loads.append(load_average())
        hf, ours = (median(results[name], "times") for name in IMPLEMENTATIONS)
        hf_cpu, our_cpu = (median(results[name], "cpu_times") for name in IMPLEMENTATIONS)
        hf_mib, our_mib = (statistics.median(r["mib"] for r in results[name]) for name in IMPLEMENTATIONS)
        tokens = results["hf"][0]["tokens"]
        print(
            f"| {length} | {hf:.2f} | {ours:.2f} | {hf / ours:.2f}x | {tokens / hf:.0f} | {tokens / ours:.0f} "
            f"| {hf_cpu:.2f} | {our_cpu:.2f} | {hf_cpu / our_cpu:.2f}x | {hf_mib:.0f} | {our_mib:.0f} "
            f"| {min(loads):.1f}-{max(loads):.1f} |",
            flush=True,
        )
    print(f"\nat the end: load average {load_average():.2f}, CPU pressure {cpu_pressure()}")


def median(results: list[dict], key: str) -> float:
    """The median over every timed step of every round."""
    return statistics.median(value for result in results for value in result[key])


if __name__ == "__main__":
    main()
