"""Data-parallel scaling of a trial's training: 1 vs. 2 Ray Train workers, through the real search.

    .venv/bin/python bench/data_parallel.py [--steps 24] [--pairs-per-worker 8] [--length 128] [--rounds 2]

Each configuration is a whole `python -m platform.search` run of the `smoke` spec with one trial
(DocSplit on the packaged news corpus, all-MiniLM-L6-v2, mean pooling) whose DDP workers (gloo on
CPU) each get a fixed share of the batch (weak scaling: 2 workers train twice the pairs per step).
Throughput is the trial's own training measure, tokens per second over its training steps
(non-padding tokens of both views, all ranks; data, forward, backward, all-reduce and the
optimizer, not checkpointing or evaluation), as it prints it at its one evaluation round.

Configurations (torch threads per worker = the worker's whole CPUs):

- 1 worker x 1 thread, and 2 workers x 1 thread: the scaling ratio, each worker with a core;
- 1 worker x 2 threads: the same 2 cores used by one worker's intra-op threads instead.

Each runs ``--rounds`` times, the order reversed every round; medians are quoted. Prints Markdown
for bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import copy
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from child import gpus  # bench/child.py, beside this script

import platform

ROOT = Path(__file__).resolve().parent.parent
THROUGHPUT = re.compile(r"step (\d+)/\d+ loss \S+ objective \S+ (?:\(validation\) )?\((\d+) tokens/s\)")
CONFIGS = {  # name: (workers, CPUs per worker; threads = floor(CPUs))
    "1 worker x 1 thread": (1, 0.9),
    "2 workers x 1 thread": (2, 0.9),
    "1 worker x 2 threads": (1, 1.9),
}


def spec_file(directory: Path, workers: int, cpus: float, args: argparse.Namespace) -> Path:
    raw = yaml.safe_load((ROOT / "search_spaces" / "smoke.yaml").read_text())
    train = {
        "workers": workers,
        "cpus_per_worker": cpus,
        "batch_size": args.pairs_per_worker * workers,
        "steps": args.steps,
        "eval_every": args.steps,
        "max_length": args.length,
    }
    search = {"samples": 1}
    evaluation = {"cpus_per_evaluator": 0.05, "threads": 1}
    profile = copy.deepcopy(raw["profiles"]["local"])
    for section, changes in (("train", train), ("search", search), ("evaluation", evaluation)):
        raw.setdefault(section, {}).update(changes)
        profile.setdefault(section, {}).update(changes)
    raw["profiles"] = {"local": profile}
    path = directory / f"dp_{workers}_{cpus}.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def one_run(name: str, args: argparse.Namespace) -> float:
    workers, cpus = CONFIGS[name]
    with tempfile.TemporaryDirectory() as tmp:
        spec = spec_file(Path(tmp), workers, cpus, args)
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "platform.search",
                str(spec),
                "--profile",
                "local",
                "--validation-only",
                "--run-dir",
                f"{tmp}/run",
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
    if done.returncode != 0:
        raise SystemExit(f"{name}: search failed ({done.returncode}):\n{done.stderr[-3000:]}")
    rates = [int(rate) for _, rate in THROUGHPUT.findall(done.stdout + done.stderr)]
    if not rates:
        raise SystemExit(f"{name}: no throughput line in the search's output:\n{done.stdout[-3000:]}")
    return float(rates[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=24)
    parser.add_argument("--pairs-per-worker", type=int, default=8)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    began = time.perf_counter()
    rates: dict[str, list[float]] = {name: [] for name in CONFIGS}
    names = list(CONFIGS)
    for round_ in range(args.rounds):
        for name in names if round_ % 2 == 0 else names[::-1]:
            rates[name].append(one_run(name, args))
            print(f"measured: {name}: {rates[name][-1]:.0f} tokens/s", file=sys.stderr, flush=True)
    median = {name: statistics.median(values) for name, values in rates.items()}

    import ray
    import torch

    print("## Data-parallel scaling (`bench/data_parallel.py`)\n")
    print(
        f"- machine: {os.cpu_count()} CPUs, {platform.machine()}, {gpus()}; Python {platform.python_version()}, "
        f"torch {torch.__version__}, ray {ray.__version__}; {time.strftime('%Y-%m-%d')}; "
        f"benchmark wall time {time.perf_counter() - began:.0f} s"
    )
    print(
        f"- one trial of the smoke spec: {args.steps} steps of {args.pairs_per_worker} pairs per worker, "
        f"{args.length} tokens, DDP over gloo; {args.rounds} runs per configuration\n"
    )
    print("| configuration | tokens/s (median) | runs |")
    print("|---|---|---|")
    for name in CONFIGS:
        print(f"| {name} | {median[name]:.0f} | {', '.join(f'{v:.0f}' for v in rates[name])} |")
    scaling = median["2 workers x 1 thread"] / median["1 worker x 1 thread"]
    threads = median["2 workers x 1 thread"] / median["1 worker x 2 threads"]
    print(f"\nScaling, 2 workers / 1 worker (1 thread each): **{scaling:.2f}x** (bar: >= 1.7x).")
    print(f"2 workers x 1 thread / 1 worker x 2 threads (the same 2 cores): {threads:.2f}x.")


if __name__ == "__main__":
    main()
