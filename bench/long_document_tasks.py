"""What users already have, on the long-document tasks at LongEmbed's sizes: the packaged
all-MiniLM-L6-v2 as its users run it (truncated at 256 and at its 512 positions; averaged over
256-token windows), converted to a 4,096-token Longformer untrained and read whole (where every
docsplit_long search starts), and BM25.

    python bench/long_document_tasks.py [--out bench/results/long_document_tasks.json]

Each (row, task) is scored through the evaluators' own ``Evaluator`` (no Ray) on the validation part
only (the test parts are locked: tests/bench/test_locked_parts.py), at the benchmark sizes: needle
and passkey at 256 to 4,096 tokens, 50 queries against 100 haystacks a length; every query of the
real-text passage task. The real-text task is also scored on a second, independent draw: the
``retired`` news articles (the first held-out tenth's other half, scored by nothing that chooses),
read as a collection (``long-passage:<file>``, both of its halves), so a difference that holds on
both is not one draw's luck. Each row keeps its item outcomes, and the paired comparisons the
issue's bar names are computed from them: the windowed MiniLM against each truncation, overall and
on the queries whose document is over 1,024 tokens.

Results are written to ``--out`` as each (row, task) finishes; a run started again scores only what
the file lacks. Prints the Markdown for bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.markdown import table  # noqa: E402

SYNTHETIC = ("needle-retrieval", "passkey-retrieval")
REAL = "news-passage-retrieval"
RETIRED = "retired"  # the second draw of the real-text task
ROWS = ("bm25", "minilm-256", "minilm-512", "minilm-256-windowed", "longformer-4096")
LENGTHS = (256, 512, 1024, 2048, 4096)
OVER_1024 = ("len_1025to2048", "len_2049to4096", "len_over4096")
PAIRS = (("minilm-256-windowed", "minilm-256"), ("minilm-256-windowed", "minilm-512"))


def _row(name: str):
    """(model directory or None for BM25, Reading) of a row."""
    from doctune_core.data import cache_dir
    from doctune_core.encoder import resolve_model
    from doctune_core.longformer import cached_longformer
    from evaluators.references import Reading

    minilm = resolve_model("all-minilm-l6-v2")
    return {
        "minilm-256": (minilm, Reading(256, "truncate")),
        "minilm-256-windowed": (minilm, Reading(256, "chunk")),
        "minilm-512": (minilm, Reading(512, "truncate")),
        "longformer-4096": (str(cached_longformer(minilm, 4096, 256, cache_dir())), Reading(4096, "truncate")),
        "bm25": (None, Reading()),
    }[name]


def retired_collection(scratch: str) -> str:
    """The retired news articles as a collection file (``doctune_core.data.sources``)."""
    from doctune_core.data.news import held_out_articles

    path = Path(scratch) / "retired.jsonl"
    path.write_text("".join(json.dumps({"text": a.text}) + "\n" for a in held_out_articles("retired")))
    return str(path)


def score(name: str, task: str, parts: tuple[str, ...], scratch: str) -> list:
    """The row's item-level outcomes on ``task``, one per part."""
    from evaluators.plan import EvalBudget, EvalPlan
    from evaluators.pool import Evaluator
    from evaluators.references import Reference

    plan = EvalPlan(
        objectives={"objective": {task: 1.0}},
        actor_names=(),
        namespace="",
        budget=EvalBudget(long_length=4096),  # the benchmark sizes: EvalBudget's defaults
        max_length=512,
        batch_size=8,
        threads=int(os.environ.get("BENCH_THREADS", "2")),
        parts=("val",),
    )
    model, reading = _row(name)
    evaluator = Evaluator(plan, scratch)
    return [evaluator.reference_outcomes(Reference(name, name, model, reading), "mean", [task], p)[task] for p in parts]


def record(outcomes: list) -> dict:
    """One part's outcomes as JSON: the summary, each query's main score, its id and its stratum (the
    halves of a collection's draw joined: their queries ranked their own half's documents)."""
    ids = [f"{k}:{i}" for k, o in enumerate(outcomes) for i in o.ids]
    items = np.concatenate([o.items for o in outcomes])
    strata: dict[str, list[int]] = {}
    offset = 0
    for o in outcomes:
        for label, rows in o.strata.items():
            strata.setdefault(label, []).extend((np.asarray(rows) + offset).tolist())
        offset += len(o.items)
    summary = outcomes[0].summary() if len(outcomes) == 1 else {"main": float(np.mean(items)), "n": float(len(items))}
    return {"summary": summary, "items": items.tolist(), "ids": ids, "strata": strata}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "long_document_tasks.json")
    args = parser.parse_args()
    import torch

    results = json.loads(args.out.read_text()) if args.out.exists() else {}
    results.setdefault("machine", f"{os.cpu_count()} CPUs, torch {torch.__version__}, {time.strftime('%Y-%m-%d')}")
    rows = results.setdefault("rows", {})
    with tempfile.TemporaryDirectory() as scratch:
        retired = retired_collection(scratch)
        # the real-text task for every row first (cheap), then the synthetic grids
        for task in (REAL, RETIRED, *SYNTHETIC):
            for name in ROWS:
                row = rows.setdefault(name, {"parts": {}, "seconds": {}})
                if task in row["parts"]:  # a run started again goes on where it stopped
                    continue
                began = time.perf_counter()
                if task == RETIRED:
                    row["parts"][task] = record(score(name, f"long-passage:{retired}", ("val", "test"), scratch))
                else:
                    row["parts"][task] = record(score(name, task, ("val",), scratch))
                row["seconds"][task] = round(time.perf_counter() - began, 1)
                args.out.write_text(json.dumps(results, indent=1))
                print(f"{name}: {row['seconds'][task]} s for {task}", flush=True)
    print_tables(results)


def _outcomes(part: dict, label: str | None = None):
    from doctune_core.outcomes import Outcomes, mean_of_rows

    rows = np.arange(len(part["items"])) if label is None else np.array(part["strata"].get(label, []), int)
    return Outcomes({}, np.asarray(part["items"])[rows], mean_of_rows, ids=tuple(np.asarray(part["ids"])[rows]))


def paired(results: dict, a: str, b: str, task: str, over_1024: bool = False) -> str:
    from doctune_core.noise import paired_gain

    part_a, part_b = (results["rows"][r]["parts"][task] for r in (a, b))
    if over_1024:
        rows = sorted(i for label in OVER_1024 for i in part_a["strata"].get(label, []))
        part_a = {**part_a, "strata": {"over": rows}}
        part_b = {**part_b, "strata": {"over": rows}}
    label = "over" if over_1024 else None
    gain = paired_gain({task: _outcomes(part_a, label)}, {task: _outcomes(part_b, label)}, {task: 1.0})
    return f"{gain.cell()[:-1]}, n {len(_outcomes(part_a, label).items)})"


BUCKETS = ("len_513to1024", "len_1025to2048", "len_2049to4096")


def passage_table(results: dict) -> list[str]:
    """The real-text task per row: nDCG@10 ± its 95% interval on validation, the retired draw beside
    it, and validation by the length of the article to find (its n)."""
    rows = []
    for name, row in results["rows"].items():
        val, retired = row["parts"].get(REAL), row["parts"].get(RETIRED)
        if not val:
            continue
        summary = val["summary"]
        cells = [f"{summary['main']:.3f} ± {1.96 * summary['main_se']:.3f}"]
        cells.append(f"{retired['summary']['main']:.3f}" if retired else "–")
        cells += [f"{summary.get(b, float('nan')):.3f} ({int(summary.get(b + '_n', 0))})" for b in BUCKETS]
        rows.append([name, *cells])
    return table(["row", "val", "retired", *(f"val {b[4:]} (n)" for b in BUCKETS)], rows)


def gains_table(results: dict) -> list[str]:
    """The paired gains of ``PAIRS`` on the real-text task (``doctune_core.noise.paired_gain``, 95%), on
    each draw, over all its queries and over those whose article is over 1,024 tokens."""
    rows, found = [], results["rows"]
    for a, b in PAIRS:
        for draw, name in ((REAL, "validation"), (RETIRED, "retired")):
            if all(draw in found.get(r, {}).get("parts", {}) for r in (a, b)):
                rows.append([f"{a} - {b}", name, "all", paired(results, a, b, draw)])
                rows.append([f"{a} - {b}", name, "over 1,024", paired(results, a, b, draw, over_1024=True)])
    return table(["gain", "draw", "articles", "paired gain (95%, n)"], rows)


def synthetic_table(results: dict, task: str) -> list[str]:
    """A synthetic task's acc@1 per row: all lengths (± 95%) and per haystack length."""
    rows = []
    for name, row in results["rows"].items():
        part = row["parts"].get(task)
        if part:
            summary = part["summary"]
            overall = f"{summary['main']:.3f} ± {1.96 * summary['main_se']:.3f}"
            rows.append([name, overall, *(_length_score(part, n) for n in LENGTHS)])
    return table(["row", "all", *(str(n) for n in LENGTHS)], rows)


def print_tables(results: dict) -> None:
    print(f"\n{results['machine']}\n")
    print(f"{REAL}, nDCG@10 ± 95% interval (validation; the retired draw beside it), by document length\n")
    print("\n".join(passage_table(results)))
    print("\nPaired gains (95% paired interval, doctune_core.noise.paired_gain):\n")
    print("\n".join(gains_table(results)))
    for task in SYNTHETIC:
        print(f"\n{task}, acc@1 per haystack length (validation; 50 queries against 100 haystacks; chance 0.010)\n")
        print("\n".join(synthetic_table(results, task)))


def _length_score(part: dict, length: int) -> str:
    """acc@1 over one haystack length's queries (its three depth cells)."""
    rows = sorted(i for label, r in part["strata"].items() if label.startswith(f"len{length}_depth") for i in r)
    return f"{np.mean(np.asarray(part['items'])[rows]):.2f}" if rows else "–"


if __name__ == "__main__":
    main()
