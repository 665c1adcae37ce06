"""Trials' wall time with scoring overlapping training (``train.overlap_scoring: true``) and without.

    python bench/scoring_overlap.py [--spec bench/overlap_own_cpus.yaml] [--profile local] [--repeats 2]

Runs the same search with overlap on and off, ``--repeats`` times each, the order alternating
between repeats, each in a fresh run directory, and reads each search's own ``timings.json``:
the trials phase (the driver's wall time from the first trial's start to the last one's end),
the trials' summed training steps (``train_seconds``) and the time training stood still for
scores (``eval_seconds``). The bar (issue: "scoring overlaps training") is the trials' time
within 10% of pure training where the evaluators have their own cores: waiting for scores at
most 10% of the training steps' time. Start-up, checkpoints and reports are the same in both
modes and reported apart (they are the search's overhead, not scoring's). Prints Markdown for
bench/RESULTS.md; medians over the repeats.
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
from pathlib import Path

from child import gpus  # bench/child.py, beside this script

ROOT = Path(__file__).resolve().parent.parent


def spec_with_overlap(spec: str, overlap: bool, directory: Path) -> Path:
    """The spec (a shipped name or a file) with ``train.overlap_scoring`` set, there and in each
    profile (so no profile undoes it)."""
    sys.path.insert(0, str(ROOT))
    from platform.spec import write_variant

    return write_variant(spec, directory / f"overlap_{'on' if overlap else 'off'}", {"train.overlap_scoring": overlap})


def one_search(spec: Path, profile: str, run_dir: Path) -> dict:
    load = Path("/proc/loadavg").read_text().split()[0]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "platform.search",
            str(spec),
            "--profile",
            profile,
            "--validation-only",
            "--run-dir",
            str(run_dir),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    if done.returncode != 0:
        raise SystemExit(f"{spec}: search failed ({done.returncode}):\n{done.stderr[-3000:]}")
    timings = json.loads((run_dir / "timings.json").read_text())
    trials = timings["trials"]
    return {
        "trials_phase": timings["phases"]["trials"],
        "train": trials["train_seconds"],
        "wait": trials["eval_seconds"],
        "rest": trials["start_up_checkpoints_and_reports_seconds"],
        "wall": timings["wall_seconds"],
        "load": f"{load} -> {Path('/proc/loadavg').read_text().split()[0]}",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spec", default=str(ROOT / "bench" / "overlap_own_cpus.yaml"))
    parser.add_argument("--profile", default="local")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    results: dict[bool, list[dict]] = {True: [], False: []}
    with tempfile.TemporaryDirectory() as tmp:
        specs = {overlap: spec_with_overlap(args.spec, overlap, Path(tmp)) for overlap in (True, False)}
        for repeat in range(args.repeats):
            for overlap in (True, False) if repeat % 2 == 0 else (False, True):
                run_dir = Path(tmp) / f"run-{'on' if overlap else 'off'}-{repeat}"
                results[overlap].append(one_search(specs[overlap], args.profile, run_dir))
                print(f"overlap {'on' if overlap else 'off'}, repeat {repeat + 1}: {results[overlap][-1]}", flush=True)
    report(args, results)


def report(args: argparse.Namespace, results: dict[bool, list[dict]]) -> None:
    import ray
    import torch

    def median(overlap: bool, key: str) -> float:
        return statistics.median(run[key] for run in results[overlap])

    print(f"\n### `{Path(args.spec).name}` at `--profile {args.profile}`\n")
    print(
        f"- machine: {os.cpu_count()} CPUs, {gpus()}; torch {torch.__version__}, ray {ray.__version__}; "
        f"{time.strftime('%Y-%m-%d %H:%M')}; {args.repeats} searches per mode, the order alternating; medians"
    )
    for overlap in (True, False):
        loads = "; ".join(run["load"] for run in results[overlap])
        print(f"- load average (1 min) before -> after each search, overlap {'on' if overlap else 'off'}: {loads}")
    print(
        "\n| overlap_scoring | trials phase (s) | training steps (s) | waiting for scores (s) "
        "| waiting / training | start-up, checkpoints, reports (s) | search wall (s) |"
    )
    print("|---|---|---|---|---|---|---|")
    for overlap in (True, False):
        train, wait = median(overlap, "train"), median(overlap, "wait")
        print(
            f"| {str(overlap).lower()} | {median(overlap, 'trials_phase'):.1f} | {train:.1f} | {wait:.1f} "
            f"| {wait / train:.1%} | {median(overlap, 'rest'):.1f} | {median(overlap, 'wall'):.1f} |"
        )
    ratio = median(True, "trials_phase") / median(False, "trials_phase")
    print(f"\nTrials phase with overlap / without: {ratio:.2f}.")


if __name__ == "__main__":
    main()
