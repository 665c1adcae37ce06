"""Training throughput of doctune's step vs. sentence-transformers', and model FLOP utilisation.

    .venv/bin/python bench/throughput.py [--threads 2] [--pairs 16] [--length 256] [--warmup 3] [--steps 6]
                                         [--rounds 2] [--profile-steps 2] [--gemm-size 2048] [--device cpu]

On a GPU (``--device cuda``) both sides run their forward and loss under bf16 autocast, as
doctune's trainer does with ``train.bf16`` (sentence-transformers' Trainer does the same with
``bf16=True``); step times end with ``torch.cuda.synchronize()``; the GEMM peak is a bf16
``torch.mm`` (give ``--gemm-size 8192``); the op profile is CPU-only and skipped
(``--profile-steps 0``).

What is compared is the training step itself, in one process, without Ray: tokenize a batch of
(anchor, positive) pairs, the encoder forward over both views, the contrastive loss, backward,
gradient clipping at norm 1.0, an AdamW step. Both sides train the embedded all-MiniLM-L6-v2
(``resolve_model("all-minilm-l6-v2")``) with mean pooling, temperature 0.05 (scale 20), the same
batches of text, the same maximum length and the same torch thread count.

- doctune: ``build_module``, ``tokenize``, the ``ContrastiveModel`` forward and ``training_loss``
  with ``TrialSettings(recipe="docsplit", mlm_weight=0.0, temperature=0.05, symmetric=...)``,
  as in ``trainers.loop.train_loop_per_worker``.
- sentence-transformers: ``SentenceTransformer(model_dir)``, its ``SentenceTransformerDataCollator``
  (the model's own ``preprocess``), ``BaseTrainer.collect_features`` and
  ``MultipleNegativesRankingLoss(scale=20)`` forward and backward, then the clipping and AdamW step
  the Trainer would run (its default ``max_grad_norm`` is 1.0). ``SentenceTransformerTrainer``
  itself is not used: it needs ``accelerate``, which this project does not install, and its
  dataloader, logging and callbacks are not part of the step being compared. MNRL embeds the
  anchor column in a forward of its own and the positive column in another (``embed_columns``,
  ``separate_first=True``), each padded to its own column's width; doctune embeds both views
  together, on the CPU in up to 4 forwards over rows of similar length, each cut to its own longest
  row (``doctune_core.encoder.embed_in_length_groups``), on a GPU in one forward padded to one width.

One-directional InfoNCE (``symmetric=False``) is the like-for-like row for MNRL's default
(``query_to_doc``); the symmetric rows compare doctune's default with MNRL's
``directions=("query_to_doc", "doc_to_query"), partition_mode="per_direction"``, the same loss.

Data: the packaged news corpus (pretraining part, sentence-split by ``prepare_corpus``), turned
into pairs once, in this process, by doctune's docsplit builder through ``PairStream`` (seed 0);
every configuration gets the same list of batches. Tokens counted are the non-padding tokens of
both views.

Model FLOPs per training step (Kaplan et al. 2020, "Scaling Laws for Neural Language Models",
Sec. 2.1, C = 6N per token; the attention term as in Narayanan et al. 2021, "Efficient
Large-Scale Language Model Training on GPU Clusters Using Megatron-LM", Sec. 5.1, whose
per-layer forward is 24Bsh^2 + 4Bs^2h, tripled for forward and backward):

    FLOPs = sum over sequences i of ( 6 * N * s_i + 12 * n_layers * h * s_i^2 )

with s_i the non-padding length of sequence i, N the non-embedding parameters (the encoder
layers' weights and biases: embedding lookups are not matrix products, and there is no output
vocabulary layer), h the hidden size. Padding, pooling, the loss and the optimizer are not
counted in MFU; a second column counts every position a forward computes, padding included (the
work the device really does: each length group's or column's width times its rows). The padding
column is the share of the computed positions that are padding. MFU = achieved FLOP/s over the
float32 GEMM rate measured in the same run (``torch.mm`` of two square matrices, same thread count,
median of 10), before the first round and after each round; the highest of these is the peak.

Every measurement runs in a fresh process: each configuration ``--rounds`` times, the order of
the configurations reversed from one round to the next (so a slow drift of a shared machine
falls on both sides alike), each process running ``--warmup`` untimed steps and then
``--steps`` timed ones; quoted are medians over all timed steps of a configuration. Two last
processes profile a few steps of each side with ``torch.profiler``: doctune's top ops by self
CPU time, beside the same ops in sentence-transformers' step. Prints Markdown for
bench/RESULTS.md. About 9 minutes with the defaults on 2 CPU cores.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from child import gpus, run_child  # bench/child.py, beside this script

ROOT = Path(__file__).resolve().parent.parent
TEMPERATURE = 0.05  # SimCSE (Gao et al. 2021) Eq. 1; MNRL's scale 20 = 1 / 0.05
GEMM_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")


def build_batches(pairs: int, steps: int) -> list[tuple[list[str], list[str]]]:
    """``steps`` batches of ``pairs`` docsplit pairs from the packaged corpus (doctune's builder)."""
    sys.path.insert(0, str(ROOT))
    from transformers import AutoTokenizer

    from doctune_core.data import DocumentStream, prepare_corpus
    from doctune_core.encoder import resolve_model
    from trainers.batches import PairStream
    from trainers.pairs import STATISTICS_DOCUMENTS, build_pairs
    from trainers.settings import TrialSettings

    tokenizer = AutoTokenizer.from_pretrained(resolve_model("all-minilm-l6-v2"))
    hp = TrialSettings(recipe="docsplit", batch_size=pairs)
    documents = DocumentStream(prepare_corpus("news-articles"), rank=0, world_size=1, seed=0)  # as one worker reads it
    pair_builder = build_pairs(
        hp,
        max_length=512,
        count_tokens=lambda text: len(tokenizer(text, add_special_tokens=False)["input_ids"]),
        documents=documents.first(STATISTICS_DOCUMENTS),
    )
    stream = PairStream(documents.read(), pair_builder, pairs, seed=0, rank=0, give_up_after=documents.rows)
    return [stream.batch(step) for step in range(steps)]


def _sequence_lengths(attention_mask) -> list[int]:
    return [int(n) for n in attention_mask.sum(1)]


def _synchronizer(device: str) -> Callable[[], None]:
    """Waits for the GPU's queued work, so a timer read after it covers that work; on the CPU nothing."""
    import torch

    return torch.cuda.synchronize if device == "cuda" else lambda: None


def train_doctune(config: dict) -> dict:
    import torch

    from doctune_core.encoder import bf16_autocast, computed_widths, resolve_model, tokenize
    from trainers.model import build_module
    from trainers.settings import TrialSettings
    from trainers.training_loss import training_loss

    hp = TrialSettings(
        recipe="docsplit", mlm_weight=0.0, temperature=TEMPERATURE, symmetric=config["symmetric"], pooling="mean"
    )
    device = torch.device(config["device"])
    module, tokenizer = build_module(resolve_model("all-minilm-l6-v2"), hp)
    module.to(device)
    optimizer = torch.optim.AdamW(module.parameters(), lr=hp.lr, weight_decay=hp.weight_decay)
    encoder = module.encoder

    def step(views: tuple[list[str], list[str]]) -> dict:
        batch = tokenize(tokenizer, views[0] + views[1], config["length"])
        inputs = {"input_ids": batch["input_ids"].to(device), "attention_mask": batch["attention_mask"].to(device)}
        optimizer.zero_grad(set_to_none=True)
        with bf16_autocast(device, enabled=device.type == "cuda"):
            loss, _ = training_loss(hp, module(**inputs))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(module.parameters(), 1.0)
        optimizer.step()
        # both views in one forward, or (on the CPU) in length groups each cut to its longest row
        widths = computed_widths(batch["attention_mask"], module.length_groups(inputs["input_ids"]))
        return {"lengths": _sequence_lengths(batch["attention_mask"]), "widths": widths}

    return {
        "step": step,
        "attention": encoder.config._attn_implementation,
        "non_embedding_parameters": sum(p.numel() for p in encoder.encoder.parameters()),
        "layers": encoder.config.num_hidden_layers,
        "hidden": encoder.config.hidden_size,
    }


def train_sentence_transformers(config: dict) -> dict:
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.trainer import BaseTrainer
    from sentence_transformers.sentence_transformer.data_collator import SentenceTransformerDataCollator
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    from doctune_core.encoder import bf16_autocast, resolve_model

    device = torch.device(config["device"])
    model = SentenceTransformer(resolve_model("all-minilm-l6-v2"), device=config["device"])
    model.max_seq_length = config["length"]
    model.train()
    if config["symmetric"]:
        directions, partition = ("query_to_doc", "doc_to_query"), "per_direction"
    else:
        directions, partition = ("query_to_doc",), "joint"
    loss_fn = MultipleNegativesRankingLoss(
        model, scale=1.0 / TEMPERATURE, directions=directions, partition_mode=partition
    )
    collator = SentenceTransformerDataCollator(preprocess_fn=model.preprocess)
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5, weight_decay=0.01)  # doctune's defaults

    def step(views: tuple[list[str], list[str]]) -> dict:
        inputs = collator([{"anchor": a, "positive": p} for a, p in zip(*views)])
        # collect_features does not use its trainer: the Trainer's own split of a batch into columns
        features, labels = BaseTrainer.collect_features(None, inputs)  # type: ignore[arg-type]
        features = [{k: v.to(device) if torch.is_tensor(v) else v for k, v in f.items()} for f in features]
        optimizer.zero_grad(set_to_none=True)
        with bf16_autocast(device, enabled=device.type == "cuda"):
            loss = loss_fn(features, labels)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        lengths = [n for f in features for n in _sequence_lengths(f["attention_mask"])]
        # MNRL embeds the anchor column in its own forward (``embed_columns``, separate_first=True):
        # two forwards of ``pairs`` rows, each padded to its own column's width
        widths = [f["input_ids"].shape[1] for f in features for _ in range(f["input_ids"].shape[0])]
        return {"lengths": lengths, "widths": widths}

    auto_model = model[0].auto_model
    return {"step": step, "attention": auto_model.config._attn_implementation}


def measure(config: dict) -> dict:
    """Run in the child process."""
    import torch

    torch.set_num_threads(config["threads"])
    if config["kind"] == "gemm":
        return measure_gemm(config)
    sys.path.insert(0, str(ROOT))
    batches = [tuple(b) for b in json.loads(Path(config["batches"]).read_text())]
    torch.manual_seed(0)
    trainer = train_doctune if config["kind"] == "doctune" else train_sentence_transformers
    setup = trainer(config)
    step = setup.pop("step")
    warmup = batches[: config["warmup"]]
    timed = batches[config["warmup"] :]
    for views in warmup:
        step(views)
    if config.get("profile_steps"):
        return setup | {"profile": profile_steps(step, timed[: config["profile_steps"]])}
    synchronize = _synchronizer(config["device"])
    synchronize()
    times, lengths, widths = [], [], []
    for views in timed:
        began = time.perf_counter()
        info = step(views)
        synchronize()  # the GPU's queued work belongs to this step
        times.append(time.perf_counter() - began)
        lengths.append(info["lengths"])
        widths.append(info["widths"])
    return setup | {"times": times, "lengths": lengths, "widths": widths}


def profile_steps(step: Callable[[tuple[list[str], list[str]]], dict], batches: list) -> dict:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for views in batches:
            step(views)
    events = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in events)
    return {
        "steps": len(batches),
        "total_self_s": total / 1e6,
        "gemm_share": sum(e.self_cpu_time_total for e in events if e.key in GEMM_OPS) / total,
        "ops": {e.key: [e.self_cpu_time_total / 1e6, e.count] for e in events},
        "attention_ops": sorted(e.key for e in events if "scaled_dot_product" in e.key),
    }


def measure_gemm(config: dict) -> dict:
    import torch

    n, device = config["size"], config["device"]
    dtype = torch.bfloat16 if device == "cuda" else torch.float32  # the precision the training step uses
    synchronize = _synchronizer(device)
    a, b = (torch.randn(n, n, device=device, dtype=dtype) for _ in range(2))
    out = torch.empty(n, n, device=device, dtype=dtype)
    for _ in range(3):
        torch.mm(a, b, out=out)
    synchronize()
    times = []
    for _ in range(config["repeats"]):
        began = time.perf_counter()
        torch.mm(a, b, out=out)
        synchronize()
        times.append(time.perf_counter() - began)
    return {"flops": 2 * n**3 / statistics.median(times)}


def run(config: dict) -> dict:
    return run_child(__file__, config)


def model_flops(lengths: list[int], parameters: int, layers: int, hidden: int) -> float:
    """Training FLOPs of one step (see the module docstring)."""
    return sum(6 * parameters * s + 12 * layers * hidden * s * s for s in lengths)


ROWS = [  # (name, kind, symmetric); the pairs to compare are rows 0/1 and 2/3
    ("doctune, one-directional InfoNCE", "doctune", False),
    ("sentence-transformers, MNRL", "st", False),
    ("doctune, symmetric InfoNCE (default)", "doctune", True),
    ("sentence-transformers, MNRL both directions", "st", True),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--pairs", type=int, default=16, help="pairs per step (two sequences each)")
    parser.add_argument("--length", type=int, default=256, help="maximum tokens per sequence")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps at the start of every process")
    parser.add_argument("--steps", type=int, default=6, help="timed steps per process")
    parser.add_argument(
        "--rounds", type=int, default=2, help="processes per configuration, in alternating order (ABBA)"
    )
    parser.add_argument("--profile-steps", type=int, default=2)
    parser.add_argument("--gemm-size", type=int, default=2048)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(json.loads(args.child))))
        return

    began = time.perf_counter()
    batches = build_batches(args.pairs, args.warmup + args.steps)
    with tempfile.TemporaryDirectory() as tmp:
        batch_file = Path(tmp) / "batches.json"
        batch_file.write_text(json.dumps(batches))
        base = {
            "threads": args.threads,
            "length": args.length,
            "warmup": args.warmup,
            "batches": str(batch_file),
            "device": args.device,
        }
        gemm = {"kind": "gemm", "threads": args.threads, "size": args.gemm_size, "repeats": 10, "device": args.device}
        peaks = [run(gemm)["flops"]]
        rows: dict[str, list[dict]] = {name: [] for name, _, _ in ROWS}
        for round_ in range(args.rounds):
            # the order reverses every round, so a slow drift of the machine hits both sides alike
            for name, kind, symmetric in ROWS if round_ % 2 == 0 else ROWS[::-1]:
                rows[name].append(run(base | {"kind": kind, "symmetric": symmetric}))
                print(f"measured: {name} ({time.perf_counter() - began:.0f} s)", file=sys.stderr, flush=True)
            peaks.append(run(gemm)["flops"])
        profile = base | {"symmetric": False, "warmup": 1, "profile_steps": args.profile_steps}
        profiled = {kind: run(profile | {"kind": kind}) for kind in ("doctune", "st")} if args.profile_steps else {}
    report(args, rows, peaks, profiled, time.perf_counter() - began)


def report(
    args: argparse.Namespace, rows: dict[str, list[dict]], peaks: list[float], profiled: dict, wall: float
) -> None:
    import sentence_transformers
    import torch
    import transformers

    shape = rows[ROWS[0][0]][0]  # a doctune process reports the model's shape
    parameters, layers, hidden = shape["non_embedding_parameters"], shape["layers"], shape["hidden"]
    peak = max(peaks)
    gpu = f"{gpus()}, measured on the {args.device}"
    print(
        f"machine: {_cpu_model()}, {os.cpu_count()} CPUs, {gpu}; Python {sys.version.split()[0]}, "
        f"torch {torch.__version__}, transformers {transformers.__version__}, "
        f"sentence-transformers {sentence_transformers.__version__}; {args.threads} threads; "
        f"{time.strftime('%Y-%m-%d')}"
    )
    print(
        f"batch: {args.pairs} pairs ({2 * args.pairs} sequences) of docsplit views, at most {args.length} tokens; "
        f"per configuration {args.rounds} processes (order reversed each round), each {args.warmup} warm-up steps "
        f"then {args.steps} timed steps; medians over the {args.rounds * args.steps} timed steps; "
        f"benchmark wall time {wall:.0f} s\n"
    )
    rates = ", ".join(f"{p / 1e9:.1f}" for p in peaks)
    precision = "bf16" if args.device == "cuda" else "float32"
    print(
        f"{precision} GEMM ({args.gemm_size}^2 torch.mm, median of 10) before and after each round: {rates} GFLOP/s; "
        f"peak taken as the highest, {peak / 1e9:.1f} GFLOP/s"
    )
    print(f"model: {parameters / 1e6:.2f}M non-embedding parameters, {layers} layers, hidden {hidden}\n")
    print(
        "| step | s/step (median) | per process | tokens/step | tokens/s | padding | GFLOP/s | MFU "
        "| MFU counting computed padding |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    summary = {}
    for name, processes in rows.items():
        per_step = []  # (seconds, tokens, model FLOPs, FLOPs of every computed position, computed positions)
        for r in processes:
            for t, lengths, widths in zip(r["times"], r["lengths"], r["widths"]):
                flops = model_flops(lengths, parameters, layers, hidden)
                computed_flops = model_flops(widths, parameters, layers, hidden)
                per_step.append((t, sum(lengths), flops, computed_flops, sum(widths)))
        seconds = statistics.median(s[0] for s in per_step)
        tokens = statistics.median(s[1] for s in per_step)
        tokens_s = statistics.median(s[1] / s[0] for s in per_step)
        flops_s = statistics.median(s[2] / s[0] for s in per_step)
        computed_flops_s = statistics.median(s[3] / s[0] for s in per_step)
        padding = 1 - sum(s[1] for s in per_step) / sum(s[4] for s in per_step)
        by_process = ", ".join(f"{statistics.median(r['times']):.2f}" for r in processes)
        summary[name] = tokens_s
        print(
            f"| {name} | {seconds:.2f} | {by_process} | {tokens:.0f} | {tokens_s:.0f} | {padding:.1%} "
            f"| {flops_s / 1e9:.1f} | {flops_s / peak:.1%} | {computed_flops_s / peak:.1%} |"
        )
    attention = {r["attention"] for processes in rows.values() for r in processes}
    print(f"\nattention implementation (config._attn_implementation): {', '.join(sorted(attention))}")
    for doctune, st in [(ROWS[0][0], ROWS[1][0]), (ROWS[2][0], ROWS[3][0])]:
        print(f"tokens/s, {doctune} / {st}: {summary[doctune] / summary[st]:.2f}x")
    if not profiled:
        return
    ours, theirs = profiled["doctune"]["profile"], profiled["st"]["profile"]
    print(f"\nprofile of {ours['steps']} steps each (one-directional loss), self CPU time by op:\n")
    for side, p in (("doctune", ours), ("sentence-transformers", theirs)):
        print(
            f"- {side}: {p['total_self_s']:.1f} s in all; GEMM ops ({', '.join(GEMM_OPS)}) {p['gemm_share']:.1%} "
            f"of it; attention ops seen: {', '.join(p['attention_ops'])}"
        )
    print("\n| op | doctune: self CPU (s) | share | calls | sentence-transformers: self CPU (s) | share | calls |")
    print("|---|---|---|---|---|---|---|")
    for op, (seconds, calls) in sorted(ours["ops"].items(), key=lambda item: -item[1][0])[:15]:
        other, other_calls = theirs["ops"].get(op, [0.0, 0])
        print(
            f"| `{op}` | {seconds:.2f} | {seconds / ours['total_self_s']:.1%} | {calls} | {other:.2f} "
            f"| {other / theirs['total_self_s']:.1%} | {other_calls} |"
        )


def _cpu_model() -> str:
    for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
        if line.startswith("Model name:"):
            return line.split(":", 1)[1].strip()
    return "unknown CPU"


if __name__ == "__main__":
    main()
