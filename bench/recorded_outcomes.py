"""Item outcomes of a trained checkpoint and its bases on the same validation items: the recorded runs
bench/gain_calibration.py resamples.

    .venv/bin/python bench/recorded_outcomes.py --run RUN_DIR [--trained CHECKPOINT] [--rows ROW ...]
        [--repeats 10] [--profile full|local] [--out FILE]

``RUN_DIR``: a ``docsplit_long`` search (``python -m platform.search docsplit_long.yaml --profile
local --run-dir RUN_DIR``). Its rows: ``trained``, ``--trained`` (a trial's checkpoint directory,
``RUN_DIR/trials/<id>/checkpoints/step_N``; by default the winner the search exported to
``best/``); ``converted``, its untrained converted base (``baseline-converted``); ``base``, the base
as given (``baseline``): the two comparisons a search prints. ``--rows`` scores some of them (runs
for the others may go on beside it: the file is written under a lock). Each is scored on the
validation parts of the default objective's tasks, with ``--repeats`` few-shot draws (the
calibration draws the 3 or 5 a profile ships from them): at the full profile's sizes
(``EvalBudget``'s defaults: every validation query, R8's validation part, needle and passkey
haystacks of 256 to 4,096 tokens, 50 questions a length), or with ``--profile local`` at the local
profile's (its own evaluation plan: 60 title queries over 100 documents, 200 R8 documents, 60
passages, the needle and passkey questions against their pools at 2,048 tokens, the haystacks a
round scores; bench/results/recorded_outcomes_local.json). Validation only: a locked test part is
never read here.

Writes ``--out`` (bench/results/recorded_outcomes.json) after each row and task; a run started
again goes on where it stopped.
"""

from __future__ import annotations

import argparse
import dataclasses
import fcntl
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if __name__ == "__main__":  # the project's ``platform`` package must come before the stdlib's
    sys.path.insert(0, str(ROOT))
if not hasattr(sys.modules.get("platform"), "__path__"):
    sys.modules.pop("platform", None)

# the default objective's tasks (search_spaces/docsplit_long.yaml), the synthetic ones over their
# whole length grid: their 4,096-token stratum is what a round scores
TASKS = (
    "news-title-retrieval",
    "r8-fewshot",
    "news-passage-retrieval",
    "needle-retrieval@grid",
    "passkey-retrieval@grid",
)


def row_models(run: Path, trained: Path | None) -> dict[str, str]:
    """The rows' model directories, from the run's baseline record and ``trained`` (else its export)."""
    baselines = json.loads((run / "baseline.json").read_text())
    return {
        "trained": str(trained or run / "best"),
        "converted": baselines["baseline-converted"]["model"],
        "base": baselines["baseline"]["model"],
    }


def save(out: Path, name: str, model: str, task: str, part: dict, seconds: float, machine: str) -> None:
    """Add one row's task to ``out``, under a lock (runs for other rows may write it too)."""
    with open(out.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        results = json.loads(out.read_text()) if out.exists() else {"machine": machine, "rows": {}}
        row = results["rows"].setdefault(name, {"model": model, "parts": {}, "seconds": {}})
        row["parts"][task], row["seconds"][task] = part, seconds
        out.write_text(json.dumps(results))


def record(outcomes) -> dict:
    """One part's outcomes as JSON: every row's items (a probe's: the truth, then each draw's
    predictions), ids, strata, each draw's main score and whether the rows are binary."""
    return {
        "main": outcomes.scores.get("main", outcomes.value()),
        "items": np.asarray(outcomes.items).tolist(),
        "ids": list(outcomes.ids),
        "strata": {label: np.asarray(rows).tolist() for label, rows in outcomes.strata.items()},
        "draws": None if outcomes.draws is None else np.asarray(outcomes.draws).tolist(),
        "draw_width": outcomes.draw_width,
        "binary": outcomes.binary,
        "statistic": "mean" if outcomes.draw_width == 0 else "macro_f1_over_draws",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", type=Path, required=True)
    parser.add_argument("--trained", type=Path)
    parser.add_argument("--rows", nargs="+", choices=("trained", "converted", "base"))
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--profile", choices=("full", "local"), default="full", help="the sizes scored at")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "recorded_outcomes.json")
    args = parser.parse_args()
    import torch

    from evaluators.plan import EvalBudget, EvalPlan
    from evaluators.pool import Evaluator

    machine = f"{os.cpu_count()} CPUs, torch {torch.__version__}, {time.strftime('%Y-%m-%d')}"
    models = {name: model for name, model in row_models(args.run, args.trained).items() if name in (args.rows or name)}
    threads = int(os.environ.get("BENCH_THREADS", "2"))
    if args.profile == "local":  # the local search's own plan: the same items a round scores
        from platform.search_path.plans import evaluation_plan
        from platform.spec import load_spec

        local = evaluation_plan(load_spec("docsplit_long", "local")[0])
        budget = dataclasses.replace(local.budget, repeats=args.repeats)
        plan = dataclasses.replace(local, actor_names=(), budget=budget, threads=threads, parts=("val",))
        tasks = local.tasks
    else:
        plan = EvalPlan(
            objectives={"objective": dict.fromkeys(TASKS, 1.0)},
            actor_names=(),
            namespace="",
            budget=EvalBudget(repeats=args.repeats),  # the full profile's sizes
            max_length=4096,  # the default spec's evaluation.max_length
            batch_size=8,
            threads=threads,
            parts=("val",),
        )
        tasks = TASKS
    with tempfile.TemporaryDirectory() as scratch:
        evaluator = Evaluator(plan, scratch)
        for task in tasks:  # every row on one task, then the next (the cheap ones first)
            for name, model in models.items():
                done = json.loads(args.out.read_text())["rows"] if args.out.exists() else {}
                if task in done.get(name, {}).get("parts", {}):  # a run started again goes on where it stopped
                    continue
                began = time.perf_counter()
                part = record(evaluator.outcomes(model, "mean", [task], "val")[task])
                save(args.out, name, model, task, part, round(time.perf_counter() - began, 1), machine)
                print(f"{name}: {task} in {time.perf_counter() - began:.1f} s", flush=True)


if __name__ == "__main__":
    main()
