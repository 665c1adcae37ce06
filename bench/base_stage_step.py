"""One masked-LM step of the base stage at the local profile's size, at two block lengths.

    .venv/bin/python bench/base_stage_step.py [--lengths 256 128] [--batch 16] [--threads 1 2]
        [--rounds 3] [--warmup 1] [--steps 5]

What a step is, as in ``trainers.base_stage.loop``: a freshly initialised ``BertForMaskedLM`` of
the local base's size (4 layers, hidden 256, 4 heads, intermediate 1024, an 8,000-word
vocabulary), ``--batch`` blocks of random token ids masked by BERT's rule
(``trainers.losses.mask_tokens``), the vocabulary projection at the masked positions only
(``masked_lm_loss``), backward, clipping at norm 1, AdamW. The base stage's two workers of one
thread on 2 CPUs each run half the batch with one thread: ``--threads 1`` times that half-batch
step (their gradient all-reduce left out, the same at every length); ``--threads 2`` the whole
batch in one process. Each (length, threads) runs in a fresh process, ``--rounds`` times, the
order alternating between rounds. Prints a Markdown table of median step times and the ratio of
each length's step to the first length's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

from child import run_child  # bench/child.py, beside this script

import platform


def child(config: dict) -> dict:
    import torch
    from transformers import BertConfig, BertForMaskedLM

    from trainers.losses import mask_tokens, masked_lm_loss

    torch.set_num_threads(config["threads"])
    torch.manual_seed(0)
    length, batch = config["length"], config["batch"]
    model_config = BertConfig(
        vocab_size=8000,
        hidden_size=256,
        num_hidden_layers=4,
        num_attention_heads=4,
        intermediate_size=1024,
        max_position_embeddings=length,
    )
    model = BertForMaskedLM(model_config).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
    input_ids = torch.randint(5, 8000, (batch, length))
    masked, labels = mask_tokens(input_ids, torch.zeros_like(input_ids), 4, 8000, torch.Generator().manual_seed(0))
    attention_mask = torch.ones_like(input_ids)
    times = []
    for step in range(config["warmup"] + config["steps"]):
        began = time.perf_counter()
        loss = masked_lm_loss(model, masked, attention_mask, labels)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if step >= config["warmup"]:
            times.append(time.perf_counter() - began)
    return {"step_s": statistics.median(times)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[256, 128])
    parser.add_argument("--batch", type=int, default=16, help="the global batch (the base's batch_size)")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    configs = [(length, threads) for threads in args.threads for length in args.lengths]
    seen: dict[tuple[int, int], list[float]] = {c: [] for c in configs}
    for round_ in range(args.rounds):
        for length, threads in configs if round_ % 2 == 0 else reversed(configs):
            batch = args.batch // 2 if threads == 1 else args.batch  # one of the two workers' halves
            config = {"length": length, "threads": threads, "batch": batch, "warmup": args.warmup, "steps": args.steps}
            seen[(length, threads)].append(run_child(__file__, config)["step_s"])

    import torch

    print(f"- machine: {platform.machine()}, torch {torch.__version__}; {time.strftime('%Y-%m-%d %H:%M')}")
    print(f"- `{' '.join(sys.argv)}`\n")
    print("| threads | blocks | length | median step s | rounds | vs length " + str(args.lengths[0]) + " |")
    print("|---|---:|---:|---:|---|---:|")
    for length, threads in configs:
        median = statistics.median(seen[(length, threads)])
        first = statistics.median(seen[(args.lengths[0], threads)])
        batch = args.batch // 2 if threads == 1 else args.batch
        rounds = ", ".join(f"{t:.3f}" for t in seen[(length, threads)])
        print(f"| {threads} | {batch} | {length} | {median:.3f} | {rounds} | {median / first:.2f} |")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        print(json.dumps(child(json.loads(sys.argv[2]))))
    else:
        main()
