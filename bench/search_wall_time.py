"""Wall time of whole searches, end to end through the CLI (Ray start to exported winner).

    python bench/search_wall_time.py [--spec docsplit_long] [--profile local] [--repeats 1]

Prints a Markdown block (machine, versions, median wall time, trials, objective of the winner
and of the baseline, and where the wall time went: the search's own ``timings.json``, its
overhead share against the 5% bar) for bench/RESULTS.md. Each run uses a fresh run directory; the data cache
is warm after the first run of a machine, as for a user.
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
from collections import Counter
from pathlib import Path

from child import gpus  # bench/child.py, beside this script

import platform

ROOT = Path(__file__).resolve().parent.parent


def one_run(spec: str, profile: str) -> tuple[float, list[dict], dict]:
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        began = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "platform.search", spec, "--profile", profile, "--run-dir", str(run_dir)],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        wall = time.perf_counter() - began
        if done.returncode != 0:
            raise SystemExit(f"search failed ({done.returncode}):\n{done.stderr[-3000:]}")
        timings = json.loads((run_dir / "timings.json").read_text())
        return wall, json.loads((run_dir / "leaderboard.json").read_text()), timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spec", default="docsplit_long")
    parser.add_argument("--profile", default="local")
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    runs = [one_run(args.spec, args.profile) for _ in range(args.repeats)]
    walls = [wall for wall, _, _ in runs]
    rows, timings = runs[-1][1], runs[-1][2]
    baseline = next(r for r in rows if r["trial"] == "baseline")
    best = next(r for r in rows if not r["trial"].startswith("baseline") and r["objective"] is not None)

    import ray
    import torch

    print(f"### `{args.spec}` at `--profile {args.profile}`\n")
    print(
        f"- machine: {os.cpu_count()} CPUs, {platform.machine()}, {gpus()}; Python {platform.python_version()}, "
        f"torch {torch.__version__}, ray {ray.__version__}; {time.strftime('%Y-%m-%d')}"
    )
    print(
        f"- wall time, median of {len(walls)}: {statistics.median(walls):.0f} s "
        f"(runs: {', '.join(f'{w:.0f}' for w in walls)})"
    )
    trials = [r for r in rows if not r["trial"].startswith("baseline")]
    statuses = Counter(r["status"].split(" (")[0] for r in trials)
    print(f"- trials: {len(trials)} ({', '.join(f'{n} {s}' for s, n in sorted(statuses.items()))})")
    print(f"- objective: winner {best['objective']:.4f} (trial {best['trial']}), baseline {baseline['objective']:.4f}")
    overheads = [t["shares"]["overhead"] for _, _, t in runs]
    print(
        f"- overhead share (neither training steps, evaluation nor base stage; bar <= 5%), median of "
        f"{len(runs)}: {statistics.median(overheads):.1%} (runs: {', '.join(f'{o:.1%}' for o in overheads)})\n"
    )
    print("Where the last run's wall time went (its `timings.json`):\n")
    print("| driver phase | seconds |")
    print("|---|---|")
    for phase, seconds in timings["phases"].items():
        print(f"| {phase} | {seconds:.1f} |")
    trials = timings["trials"]
    print(
        f"\nInside the trials (summed over trials): wall {trials['wall_seconds']:.1f} s, training steps "
        f"{trials['train_seconds']:.1f} s, waiting for scores {trials['eval_seconds']:.1f} s, start-up, "
        f"checkpoints and reports {trials['start_up_checkpoints_and_reports_seconds']:.1f} s; mean "
        f"concurrency {trials['mean_concurrency']:.2f}.\n"
    )
    print("| share of the wall time | " + " | ".join(timings["shares"]) + " |")
    print("|---" * (len(timings["shares"]) + 1) + "|")
    print("| last run | " + " | ".join(f"{v:.1%}" for v in timings["shares"].values()) + " |")


if __name__ == "__main__":
    main()
