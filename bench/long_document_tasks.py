"""What users already have, on the long-document tasks: the packaged all-MiniLM-L6-v2 as its users run
it (256 tokens truncated; averaged over 256-token windows), at its 512 positions, converted to a
4,096-token Longformer untrained (what every docsplit_long search starts from), and BM25.

    python bench/long_document_tasks.py [--out bench/results/long_document_tasks.json] [--per-length 30]

Each (row, task) is scored through the evaluators' own ``Evaluator`` (no Ray) on its validation
part only: the test parts are locked (tests/bench/test_locked_parts.py). The file also keeps each
row's scores on the ``retired`` parts, the test parts as they were before they were locked (news
text from the held-out tenth's second half, test templates and names): an independent second draw,
so a difference that holds on both is not one draw's luck. Results are written to ``--out`` as each
row finishes, and a run started again scores only the (row, task) pairs the file lacks. Prints
Markdown tables for bench/RESULTS.md: the main score ± 95% interval per row, task and part, then
acc@1 per haystack length and depth.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TASKS = ("needle-retrieval", "passkey-retrieval", "news-passage-retrieval", "news-title-retrieval")
SYNTHETIC = ("needle-retrieval", "passkey-retrieval")  # --per-length caps these; the others score every query
PARTS = ("val", "retired")  # what the file holds; a run scores validation only
ROWS = ("minilm-256", "minilm-256-windowed", "minilm-512", "longformer-4096", "bm25")


def _row(name: str):
    """(model directory or None for BM25, Reading) of a row."""
    from core.data import cache_dir
    from core.encoder import resolve_model
    from core.longformer import cached_longformer
    from evaluators.references import Reading

    minilm = resolve_model("all-minilm-l6-v2")
    return {
        "minilm-256": (minilm, Reading(256, "truncate")),
        "minilm-256-windowed": (minilm, Reading(256, "chunk")),
        "minilm-512": (minilm, Reading(512, "truncate")),
        "longformer-4096": (str(cached_longformer(minilm, 4096, 256, cache_dir())), Reading(4096, "truncate")),
        "bm25": (None, Reading()),
    }[name]


def score_row(name: str, tasks: list[str], per_length: int | None, scratch: str) -> dict:
    from evaluators.plan import EvalBudget, EvalPlan
    from evaluators.pool import Evaluator
    from evaluators.references import Reference

    plan = EvalPlan(
        objectives={"objective": dict.fromkeys(tasks, 1.0)},
        actor_names=(),
        namespace="",
        budget=EvalBudget(long_queries=per_length, long_length=4096),
        max_length=512,
        batch_size=8,
        threads=int(os.environ.get("BENCH_THREADS", "2")),
        parts=("val",),
    )
    model, reading = _row(name)
    began = time.perf_counter()
    scores = Evaluator(plan, scratch).reference_scores(Reference(name, name, model, reading), "mean", tasks)
    return {"scores": scores, "seconds": round(time.perf_counter() - began, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "long_document_tasks.json")
    parser.add_argument(
        "--per-length", type=int, default=30, help="needle and passkey queries per haystack length (and per part)"
    )
    args = parser.parse_args()
    import torch

    results = json.loads(args.out.read_text()) if args.out.exists() else {}
    results.setdefault(
        "machine",
        f"{os.cpu_count()} CPUs, torch {torch.__version__}, {time.strftime('%Y-%m-%d')}, {args.per_length} needles "
        "per length, every query of the other tasks",
    )
    rows = results.setdefault("rows", {})
    with tempfile.TemporaryDirectory() as scratch:
        for name in ROWS:
            row = rows.setdefault(name, {"scores": {}, "seconds": {}})
            missing = [t for t in TASKS if t not in row["scores"]]
            if not missing:  # a run started again goes on where it stopped
                continue
            for tasks, cap in (
                ([t for t in missing if t in SYNTHETIC], args.per_length),
                ([t for t in missing if t not in SYNTHETIC], None),
            ):
                if not tasks:
                    continue
                scored = score_row(name, tasks, cap, scratch)
                row["scores"] |= scored["scores"]
                row["seconds"][", ".join(tasks)] = scored["seconds"]  # embedding included
                args.out.write_text(json.dumps(results, indent=1))
                print(f"{name}: {scored['seconds']} s for {', '.join(tasks)}", flush=True)
    print_tables(results)


def print_tables(results: dict) -> None:
    rows = results["rows"]
    print(f"\n{results['machine']}\n")
    print("| row | " + " | ".join(f"{t} ({p})" for t in TASKS for p in PARTS) + " |")
    print("|---|" + "---|" * (2 * len(TASKS)))
    for name, row in rows.items():
        cells = []
        for task in TASKS:
            for part in PARTS:
                values = row["scores"].get(task, {}).get(part)
                cells.append(f"{values['main']:.3f} ± {1.96 * values['main_se']:.3f}" if values else "–")
        print(f"| {name} | " + " | ".join(cells) + " |")
    for task in ("needle-retrieval", "passkey-retrieval"):
        print(f"\n{task}, acc@1 per length x depth (val / retired)\n")
        print("| row | " + " | ".join(f"{n} @ {d}%" for n in (512, 1024, 2048, 4096) for d in (10, 50, 90)) + " |")
        print("|---|" + "---|" * 12)
        for name, row in rows.items():
            parts = row["scores"][task]
            cells = [
                " / ".join(f"{parts[p][f'len{n}_depth{d}']:.2f}" for p in PARTS if p in parts)
                for n in (512, 1024, 2048, 4096)
                for d in (10, 50, 90)
            ]
            print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
