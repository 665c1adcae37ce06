"""What training the masked-LM head for a base without one costs (``trainers.mlm_head``), and how
much better than the unigram baseline the head predicts held-out masked tokens.

    .venv/bin/python bench/mlm_head_training.py [--sizes smoke,local] [--rounds 3] [--threads 2]
                                                [--out bench/results]

Each size is what ``prepare_inputs`` trains for all-MiniLM-L6-v2 under that profile:

- smoke: the smoke profile's ``mlm_head`` on its corpus (the packaged news, first 300 documents),
  sequences of ``train.max_length`` = 64 tokens;
- local: the local profile's ``mlm_head`` on the whole packaged corpus, 128 tokens;
- full: the spec defaults (``MlmHeadSettings()``) at 512 tokens (MiniLM's positions), on the whole
  corpus: what a GPU cluster's driver trains on its CPU (optional, minutes on 2 CPUs).

Every round of a size runs in a fresh process (``bench/child.py``) with an empty cache directory:
the ``ensure_mlm_head`` call that trains the head (loading the model, packing, the frozen
encoder's forward, the head's epochs, saving), then the same call again, which the cache answers.
The prepared corpora are taken from doctune's cache (prepared first if missing, not timed). Quoted
are the median and the range over rounds, with the load average seen after each round (the 2-CPU
machines are shared). Writes ``<out>/mlm_head_training.json`` (every round, machine, versions,
date, command) and prints Markdown for bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from child import gpus, run_child  # bench/child.py, beside this script

ROOT = Path(__file__).resolve().parent.parent
SIZES = {"smoke": (300, 64), "local": (None, 128), "full": (None, 512)}  # corpus documents, tokens


def settings_for(size: str) -> dict:
    from platform.spec import BUILTIN_PROFILES

    return BUILTIN_PROFILES[size].get("mlm_head", {}) if size != "full" else {}


def child(config: dict) -> dict:
    sys.path.insert(0, str(ROOT))
    import torch

    from doctune_core.data import prepare_corpus
    from doctune_core.encoder import resolve_model
    from trainers.config import MlmHeadSettings
    from trainers.mlm_head import ensure_mlm_head

    torch.set_num_threads(config["threads"])
    documents, length = SIZES[config["size"]]
    corpus = prepare_corpus("news-articles", max_documents=documents).directory
    base = resolve_model("all-minilm-l6-v2")
    times = []
    with tempfile.TemporaryDirectory() as cache:
        for _ in range(2):  # trained, then from the cache
            began = time.perf_counter()
            head = ensure_mlm_head(
                base,
                corpus,
                MlmHeadSettings(**config["settings"]),
                max_length=length,
                seed=0,
                base_name="all-minilm-l6-v2",
                corpus_name="news-articles",
                cache=Path(cache),
            )
            times.append(time.perf_counter() - began)
        record = json.loads((head.path / "doctune-mlm-head.json").read_text())
    return {
        "seconds": times[0],
        "cached_seconds": times[1],
        "training_seconds": record["seconds"],
        "held_out_loss": record["held_out_loss"],
        "unigram_loss": record["unigram_loss"],
        "training_positions": record["training_positions"],
        "held_out_positions": record["held_out_positions"],
        "smoothing_alpha": record["unigram_smoothing_alpha"],
        "load_average_1min": os.getloadavg()[0],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="smoke,local")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return
    sys.path.insert(0, str(ROOT))
    import torch
    import transformers

    from platform import machine  # the project's package keeps the standard library's functions

    sizes = args.sizes.split(",")
    rounds = {size: [] for size in sizes}
    for _ in range(args.rounds):
        for size in sizes:
            config = {"size": size, "settings": settings_for(size), "threads": args.threads}
            rounds[size].append(run_child(__file__, config))
    record = {
        "command": " ".join(["python bench/mlm_head_training.py", *sys.argv[1:]]),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": f"{os.cpu_count()} CPUs, {machine()}, {gpus()}",
        "versions": {
            "python": sys.version.split()[0],
            "torch": torch.__version__,
            "transformers": transformers.__version__,
        },
        "threads": args.threads,
        "sizes": {size: {"settings": settings_for(size), "tokens": SIZES[size][1]} for size in sizes},
        "rounds": rounds,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "mlm_head_training.json").write_text(json.dumps(record, indent=2))
    print(f"{record['date']}, {record['machine']}, torch {torch.__version__}, {args.threads} threads\n")
    print("\n".join(cost_table(record)))


def cost_table(record: dict) -> list[str]:
    """Each size: sequences x tokens (held out), the training's wall seconds (median and range over
    the rounds), from the cache, the held-out MLM loss against the unigram baseline, the masked
    positions trained (held out)."""
    from bench.markdown import table

    rows = []
    for size, runs in record["rounds"].items():
        times = [r["seconds"] for r in runs]
        first, settings = runs[0], record["sizes"][size]
        rows.append(
            [
                size,
                f"{settings['settings']['sequences']} x {settings['tokens']} ({settings['settings']['held_out']})",
                f"{statistics.median(times):.1f} ({min(times):.1f}-{max(times):.1f})",
                f"{statistics.median(r['cached_seconds'] for r in runs):.2f}",
                f"{first['held_out_loss']:.3f}",
                f"{first['unigram_loss']:.3f}",
                f"{first['training_positions']:,} ({first['held_out_positions']:,})",
            ]
        )
    header = ["size", "sequences x tokens (held out)", "seconds", "cached", "MLM loss", "unigram", "positions"]
    return table(header, rows, numeric=(4, 5))


if __name__ == "__main__":
    main()
