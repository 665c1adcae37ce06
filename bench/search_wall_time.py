"""Wall time of whole searches, end to end through the CLI (Ray start to exported winner).

    python bench/search_wall_time.py [--spec docsplit_long] [--profile local] [--repeats 1]

Prints a Markdown block (machine, versions, median wall time, trials, objective of the winner
and of the baseline) for bench/RESULTS.md. Each run uses a fresh run directory; the data cache
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

import platform

ROOT = Path(__file__).resolve().parent.parent


def one_run(spec: str, profile: str) -> tuple[float, list[dict]]:
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
        return wall, json.loads((run_dir / "leaderboard.json").read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spec", default="docsplit_long")
    parser.add_argument("--profile", default="local")
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    runs = [one_run(args.spec, args.profile) for _ in range(args.repeats)]
    walls = [wall for wall, _ in runs]
    rows = runs[-1][1]
    baseline = next(r for r in rows if r["trial"] == "baseline")
    best = next(r for r in rows if r["trial"] != "baseline" and r["objective"] is not None)

    import ray
    import torch

    print(f"### `{args.spec}` at `--profile {args.profile}`\n")
    print(
        f"- machine: {os.cpu_count()} CPUs, {platform.machine()}, no GPU used; Python {platform.python_version()}, "
        f"torch {torch.__version__}, ray {ray.__version__}; {time.strftime('%Y-%m-%d')}"
    )
    print(
        f"- wall time, median of {len(walls)}: {statistics.median(walls):.0f} s "
        f"(runs: {', '.join(f'{w:.0f}' for w in walls)})"
    )
    trials = [r for r in rows if r["trial"] != "baseline"]
    statuses = Counter(r["status"].split(" (")[0] for r in trials)
    print(f"- trials: {len(trials)} ({', '.join(f'{n} {s}' for s, n in sorted(statuses.items()))})")
    print(f"- objective: winner {best['objective']:.4f} (trial {best['trial']}), baseline {baseline['objective']:.4f}")


if __name__ == "__main__":
    main()
