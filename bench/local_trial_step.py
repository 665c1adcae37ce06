"""One training step of the default search's local trial, with and without GradCache.

    .venv/bin/python bench/local_trial_step.py --model DIR [--pairs 8] [--length 128] [--threads 1]
        [--chunks 8 0] [--comm none] [--mlm-weight 0.1] [--rounds 3] [--warmup 2] [--steps 6] [--workers 2]
        [--precision fp32 bf16] [--check-bf16] [--trainable all positions positions+top] [--layouts 2x1 1x2]
        [--compile off on]

``--model``: the trials' converted base (for ``docsplit_long --profile local`` the vanilla
BERT-Mini converted to a Longformer with a 64-token window, ``<cache>/longformer/<digest>-L4096-W64``,
which the search prints as it converts or reuses it). Each configuration runs in fresh processes,
``--rounds`` times, the order of the configurations alternating between rounds; each process runs
``--warmup`` untimed steps and ``--steps`` timed ones. ``--workers`` processes run each
configuration at once, as the local trial's two data-parallel workers of one thread share the 2
CPUs. ``--comm`` says how their gradients are averaged: ``none`` (no communication: the step
alone), ``ddp`` (a gloo process group and DDP's all-reduce during backward, what a plain trial
step runs) or ``flat`` (one flat all-reduce after backward, what the cached step runs).

What a step is, as in ``trainers.loop.train_loop_per_worker``: ``--pairs`` DocSplit pairs from
the packaged corpus (DocSplit's p 0.5) tokenised to ``--length`` tokens with the model's
tokenizer, view A masked for the MLM term (``--mlm-weight``, through the base's own head), the
symmetric InfoNCE at tau 0.05 (DocSplit's setting, the search's first trial), backward, clipping
at norm 1, AdamW. ``--chunks 0`` is the plain step (one forward of both views, one backward);
``--chunks N`` is GradCache in chunks of N sequences (``trainers.grad_cache.cached_step``), exact
gradients of the same loss at the cost of a second forward. ``--precision bf16`` runs the forward
under ``doctune_core.encoder.bf16_autocast`` as ``train.bf16`` does (on a CPU with bf16 instructions; on
another the script refuses it). ``--check-bf16`` compares, on the same weights and batches, the
loss and the gradients of a bf16 step with the fp32 step's: the relative difference of the losses,
the cosine between the flattened gradients and their norms' ratio, per batch. ``--trainable``
trains what the hyperparameter ``trainable`` trains (``trainers.trainable``: the position rows a
conversion added alone skip every weight gradient, not the backward through the layers).
``--layouts`` compares ways of spending the CPUs on the same step, each ``WORKERSxTHREADS``: ``2x1``
is the local trial's two one-thread workers, ``1x2`` one worker of two threads taking the whole
batch (``--pairs`` x ``--workers`` pairs, no communication); by default ``--workers`` x ``--threads``.
``--compile on`` runs the step's forward through ``torch.compile`` (inductor; it needs a C++
compiler on CPUs): its first step, compilation included, is reported apart as what it costs once.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

from child import cpu_name, gpus  # bench/child.py, beside this script
from throughput import build_batches  # bench/throughput.py: the docsplit batches it times

ROOT = Path(__file__).resolve().parent.parent


def measure(config: dict) -> dict:
    """Run in a child process: time the steps of one configuration."""
    import torch

    sys.path.insert(0, str(ROOT))
    from doctune_core.encoder import bf16_autocast, tokenize
    from trainers.grad_cache import all_reduce_gradients, cached_step
    from trainers.loop import _mlm_inputs
    from trainers.model import build_module
    from trainers.settings import TrialSettings
    from trainers.trainable import parameter_groups
    from trainers.training_loss import training_loss

    torch.set_num_threads(config["threads"])
    torch.manual_seed(config["process"])
    if config["comm"] != "none":
        import torch.distributed as dist

        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(config["port"]))
        dist.init_process_group("gloo", rank=config["process"], world_size=config["workers"])
    hp = TrialSettings(
        recipe="docsplit",
        temperature=0.05,
        mlm_weight=config["mlm_weight"],
        symmetric=True,
        pooling="mean",
        trainable=config.get("trainable", "all"),
    )
    module, tokenizer = build_module(config["model"], hp)
    # the gradients averaged across the processes as a trial does: DDP's bucketed all-reduce during
    # backward (the plain step), or one flat all-reduce after it (what the cached step does)
    forward = torch.nn.parallel.DistributedDataParallel(module) if config["comm"] == "ddp" else module
    if config.get("compile") == "on":
        forward = torch.compile(forward)
    optimizer = torch.optim.AdamW(parameter_groups(module, hp.trainable, hp.weight_decay), lr=5e-5)
    mask_rng = torch.Generator().manual_seed(config["process"])
    batches = build_batches(config["pairs"], config["warmup"] + config["steps"])
    device = torch.device("cpu")
    autocast = bf16_autocast(device, config["precision"] == "bf16")

    def step(views: tuple[list[str], list[str]]) -> None:
        batch = tokenize(tokenizer, views[0] + views[1], config["length"])
        inputs = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
        if module.with_mlm:
            inputs |= _mlm_inputs(batch, len(views[0]), tokenizer, mask_rng, device)
        optimizer.zero_grad(set_to_none=True)
        if config["chunk"]:
            cached_step(module, inputs, hp, config["chunk"], autocast)
        else:
            with autocast:
                loss = training_loss(hp, forward(**inputs))[0]
            loss.backward()
        if config["comm"] == "flat":
            all_reduce_gradients(module)
        torch.nn.utils.clip_grad_norm_(module.parameters(), 1.0)
        optimizer.step()

    if config.get("check"):
        return {"check": [_bf16_against_fp32(module, hp, tokenizer, views, config["length"]) for views in batches]}
    times = []
    for views in batches:
        began = time.perf_counter()
        step(views)
        times.append(time.perf_counter() - began)
    return {"step_s": times[config["warmup"] :], "first_step_s": times[:1]}


def _bf16_against_fp32(module, hp, tokenizer, views: tuple[list[str], list[str]], length: int) -> dict:
    """One batch's loss and gradients in fp32 and under bf16 autocast, from the same weights, dropout
    off (the same forward both times): the losses' relative difference, the flattened gradients'
    cosine and their norms' ratio (bf16 / fp32)."""
    import torch

    from doctune_core.encoder import bf16_autocast, tokenize
    from trainers.training_loss import training_loss

    batch = tokenize(tokenizer, views[0] + views[1], length)
    inputs = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
    module.eval()
    found = {}
    for precision in ("fp32", "bf16"):
        module.zero_grad(set_to_none=True)
        with bf16_autocast(torch.device("cpu"), precision == "bf16"):
            loss = training_loss(hp, module(**inputs))[0]
        loss.backward()
        gradient = torch.cat([p.grad.flatten() for p in module.parameters() if p.grad is not None]).double()
        found[precision] = (float(loss), gradient)
    (loss32, grad32), (loss16, grad16) = found["fp32"], found["bf16"]
    return {
        "loss_fp32": loss32,
        "loss_relative_difference": abs(loss16 - loss32) / abs(loss32),
        "gradient_cosine": float(torch.nn.functional.cosine_similarity(grad16, grad32, dim=0)),
        "gradient_norm_ratio": float(grad16.norm() / grad32.norm()),
    }


def run_together(config: dict, workers: int) -> list[dict]:
    """``workers`` child processes of one configuration at once; what each one measured, in order."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    children = [
        subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--child",
                json.dumps({**config, "process": rank, "workers": workers, "port": port}),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env={**os.environ, "HF_HUB_OFFLINE": "1"},
        )
        for rank in range(workers)
    ]
    measured = []
    for child in children:
        out, err = child.communicate()
        if child.returncode != 0:
            raise SystemExit(err[-3000:])
        measured.append(json.loads(out.strip().splitlines()[-1]))
    return measured


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="the trials' converted base model directory")
    parser.add_argument("--pairs", type=int, default=8, help="pairs per worker (the local trial: 16 over 2 workers)")
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--chunks", type=int, nargs="+", default=[8, 0], help="GradCache chunk sizes; 0: plain step")
    parser.add_argument("--mlm-weight", type=float, default=0.1)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--comm",
        nargs="+",
        choices=("none", "ddp", "flat"),
        default=["none"],
        help="gradient averaging across the processes: none, DDP (plain steps), one flat all-reduce",
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--precision", nargs="+", choices=("fp32", "bf16"), default=["fp32"])
    parser.add_argument("--trainable", nargs="+", choices=("all", "positions", "positions+top"), default=["all"])
    parser.add_argument("--compile", nargs="+", choices=("off", "on"), default=["off"], help="torch.compile, or not")
    parser.add_argument(
        "--layouts", nargs="+", help="WORKERSxTHREADS each, the same total batch (default: --workers x --threads)"
    )
    parser.add_argument(
        "--check-bf16", action="store_true", help="compare a bf16 step's loss and gradients with fp32's"
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(json.loads(args.child))))
        return
    if not args.model or not Path(args.model, "config.json").is_file():
        parser.exit(2, f"--model: not a model directory: {args.model} (give the trials' converted base)\n")
    import torch

    from doctune_core.encoder import cpu_computes_bf16

    if ("bf16" in args.precision or args.check_bf16) and not cpu_computes_bf16():
        parser.exit(2, "--precision bf16: this CPU has no bf16 instructions (AVX512-BF16); bf16 would be emulated\n")

    base = {
        "model": args.model,
        "pairs": args.pairs,
        "length": args.length,
        "threads": args.threads,
        "mlm_weight": args.mlm_weight,
        "warmup": args.warmup,
        "steps": args.steps,
    }
    if args.check_bf16:
        (measured,) = run_together({**base, "chunk": 0, "comm": "none", "precision": "bf16", "check": True}, 1)
        checked = measured["check"]
        print("| batch | fp32 loss | bf16 loss, relative difference | gradients' cosine | gradient norm, bf16 / fp32 |")
        print("|---:|---:|---:|---:|---:|")
        for i, row in enumerate(checked):
            print(
                f"| {i} | {row['loss_fp32']:.4f} | {row['loss_relative_difference']:.2e} | "
                f"{row['gradient_cosine']:.5f} | {row['gradient_norm_ratio']:.4f} |"
            )
        return
    layouts = args.layouts or [f"{args.workers}x{args.threads}"]
    for layout in layouts:
        workers, _, threads = layout.partition("x")
        if not (workers.isdigit() and threads.isdigit() and int(workers) > 0 and int(threads) > 0):
            parser.exit(2, f"--layouts: {layout!r} is not WORKERSxTHREADS (e.g. 2x1)\n")
        if (args.pairs * args.workers) % int(workers):
            parser.exit(2, f"--layouts {layout}: {args.pairs * args.workers} pairs split unevenly over {workers}\n")
    variants = [
        (chunk, comm, precision, trainable, layout, compiled)
        for chunk in args.chunks
        for comm in args.comm
        for precision in args.precision
        for trainable in args.trainable
        for layout in layouts
        for compiled in args.compile
        if not (chunk and comm == "ddp")
    ]
    total_pairs = args.pairs * args.workers
    times: dict[tuple, list[float]] = {variant: [] for variant in variants}
    first_steps: dict[tuple, list[float]] = {variant: [] for variant in variants}
    loads = []
    for round_ in range(args.rounds):
        for variant in variants if round_ % 2 == 0 else list(reversed(variants)):
            chunk, comm, precision, trainable, layout, compiled = variant
            workers, threads = map(int, layout.split("x"))
            loads.append(float(Path("/proc/loadavg").read_text().split()[0]))
            run = {**base, "chunk": chunk, "comm": comm if workers > 1 else "none", "precision": precision}
            run |= {"trainable": trainable, "threads": threads, "pairs": total_pairs // workers, "compile": compiled}
            for measured in run_together(run, workers):
                times[variant] += measured["step_s"]
                first_steps[variant] += measured["first_step_s"]
    print(
        f"machine: {os.cpu_count()} CPUs ({cpu_name()}), {gpus()}; torch {torch.__version__}; "
        f"{time.strftime('%Y-%m-%d %H:%M')}; "
        f"{total_pairs} pairs of {args.length} tokens a step over {', '.join(layouts)} (workers x threads), "
        f"MLM weight {args.mlm_weight}; {args.rounds} rounds x {args.steps} timed steps per process; "
        f"load average at each start {min(loads):.2f}-{max(loads):.2f}\n"
    )
    reference = statistics.median(times[variants[0]])
    print(
        "| step | gradients averaged by | precision | trains | workers x threads | compiled | s/step (median) | "
        "p10-p90 | speed-up against the first row | first step (s, median) |"
    )
    print("|---|---|---|---|---|---|---:|---|---:|---:|")
    averaged = {"none": "nothing (no communication)", "ddp": "DDP, during backward", "flat": "one flat all-reduce"}
    for variant, values in times.items():
        chunk, comm, precision, trainable, layout, compiled = variant
        values = sorted(values)
        low, high = values[len(values) // 10], values[(9 * len(values)) // 10]
        name = f"GradCache, chunks of {chunk}" if chunk else "plain (one forward, one backward)"
        print(
            f"| {name} | {averaged[comm]} | {precision} | {trainable} | {layout} | {compiled} | "
            f"{statistics.median(values):.3f} | {low:.3f}-{high:.3f} | {reference / statistics.median(values):.2f}x | "
            f"{statistics.median(first_steps[variant]):.1f} |"
        )


if __name__ == "__main__":
    main()
