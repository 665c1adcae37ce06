"""Memory and time of one training step vs. document length and batch size; plain vs. cached loss.

    python bench/long_documents.py [--threads 2] [--repeats 3]

Each measurement runs in a fresh process (so peak-memory readings do not leak between runs):
load the model, run one warm-up step, then time ``--repeats`` steps and read the process's
resident-memory high-water mark (Linux ``VmHWM``) against its resident memory before the first
step. The difference is what the step itself needed (activations, gradients, optimizer state).
Prints Markdown tables for bench/RESULTS.md.

Part 1, length: one pair (two sequences) per step, BERT-style MiniLM up to its 512 positions, the
Longformer made from it (window 256) up to 4096. Part 2, batch: pairs per step at 256 tokens,
plain loss vs. GradCache with chunks of 8 sequences.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

from child import run_child  # bench/child.py, beside this script

ROOT = Path(__file__).resolve().parent.parent


def _memory_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(field)


def measure(config: dict) -> dict:
    """Run in the child process."""
    import torch

    sys.path.insert(0, str(ROOT))
    from doctune_core.data import cache_dir
    from doctune_core.encoder import resolve_model, tokenize
    from doctune_core.longformer import cached_longformer
    from trainers.grad_cache import cached_step
    from trainers.model import build_module
    from trainers.settings import TrialSettings
    from trainers.training_loss import training_loss

    torch.set_num_threads(config["threads"])
    model_dir = resolve_model("all-minilm-l6-v2")
    if config["model"] == "longformer":
        model_dir = str(cached_longformer(model_dir, 4096, config["window"], cache_dir()))
    hp = TrialSettings(mlm_weight=0.0, recipe="simcse")
    module, tokenizer = build_module(model_dir, hp)
    optimizer = torch.optim.AdamW(module.parameters(), lr=1e-5)
    texts = ["lorem ipsum dolor sit amet " * (config["length"] // 4)] * (2 * config["pairs"])
    batch = tokenize(tokenizer, texts, config["length"])
    inputs = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        if config["chunk"]:
            cached_step(module, inputs, hp, config["chunk"])
        else:
            training_loss(hp, module(**inputs))[0].backward()
        optimizer.step()

    before = _memory_kib("VmRSS")
    step()
    times = []
    for _ in range(config["repeats"]):
        began = time.perf_counter()
        step()
        times.append(time.perf_counter() - began)
    peak = _memory_kib("VmHWM")
    tokens = int(batch["attention_mask"].sum())
    return {"step_s": statistics.median(times), "step_mib": (peak - before) / 1024, "tokens": tokens}


def run(config: dict) -> dict:
    return run_child(__file__, config)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--part", choices=("all", "length", "batch"), default="all")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(json.loads(args.child))))
        return
    base = {"threads": args.threads, "repeats": args.repeats, "window": 256, "chunk": 0}
    import torch

    print(
        f"machine: {os.cpu_count()} CPUs, torch {torch.__version__}, {args.threads} threads, "
        f"median of {args.repeats} steps; {time.strftime('%Y-%m-%d')}\n"
    )
    if args.part in ("all", "length"):
        length_table(base)
    if args.part in ("all", "batch"):
        batch_table(base)


def length_table(base: dict) -> None:
    print("| model | tokens per sequence | step time (s) | step memory (MiB) |")
    print("|---|---|---|---|")
    for model, length in [
        ("bert", 128),
        ("bert", 256),
        ("bert", 512),
        ("longformer", 512),
        ("longformer", 1024),
        ("longformer", 2048),
        ("longformer", 4096),
    ]:
        r = run(base | {"model": model, "length": length, "pairs": 1})
        print(
            f"| {model if model == 'bert' else 'longformer (window 256)'} | {length} | {r['step_s']:.2f} | "
            f"{r['step_mib']:.0f} |",
            flush=True,
        )


def batch_table(base: dict) -> None:
    print(
        "\n| pairs per step (256 tokens) | plain: time (s) | plain: memory (MiB) | cached, chunks of 8: time (s) "
        "| cached: memory (MiB) |"
    )
    print("|---|---|---|---|---|")
    for pairs in (8, 16, 32, 64):
        plain = run(base | {"model": "bert", "length": 256, "pairs": pairs})
        cached = run(base | {"model": "bert", "length": 256, "pairs": pairs, "chunk": 8})
        print(
            f"| {pairs} | {plain['step_s']:.2f} | {plain['step_mib']:.0f} | {cached['step_s']:.2f} | "
            f"{cached['step_mib']:.0f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
