"""A short trial's start-up with one setting of the Ray it runs on switched off and on, paired:
is it worth changing from what Ray ships?

    python bench/trial_start_up.py [--setting preemption-watcher|preload] [--repeats 3] [--keep DIR]

The settings (``SETTINGS``): ``preemption-watcher``, Ray Train's preemption watcher (an actor Ray
Train starts with every worker group), off and on as Ray ships it; ``preload``, Ray's worker
processes importing torch and transformers as they start (``RAY_preload_python_modules``; workers
Ray starts ahead of the tasks then have them imported when a trial's actors take them), off as Ray
ships it and on. Each repeat runs the smoke spec's search with one trial (4 steps, one scoring
round, few scoring items) twice, the setting off then on (an environment variable of the driver,
which the Ray it starts passes to its processes), so both arms of a pair see the same load. Reads
each search's ``timings.json``: the trial's start-up, checkpoints and reports (its wall time less
training and scoring) and the search's wall time. Prints a Markdown block for bench/RESULTS.md:
machine, versions, each run, the medians and the median of the paired ratios (on / off) with their
range.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))  # the project's platform package, which keeps the stdlib's names

from search_wall_time import load_average  # noqa: E402  (bench/, beside this script)

import platform  # noqa: E402

# setting -> (environment variable, its value per arm; None: unset, as Ray ships it)
SETTINGS = {
    "preemption-watcher": ("RAY_TRAIN_ENABLE_PREEMPTION_WATCHER", {"off": "0", "on": "1"}),
    "preload": ("RAY_preload_python_modules", {"off": None, "on": "torch,transformers"}),
}


# one short scoring round: start-up, not scoring, is measured
FEW_ITEMS = {"max_documents": 30, "max_queries": 16, "max_test": 32, "fewshot_k": 4, "repeats": 2}


def one_trial_spec(directory: Path) -> str:
    """The smoke spec, one trial of one scoring round on few items (as the suite's short searches)."""
    from platform.spec import write_variant

    changes = {"search.samples": 1, "search.warm_start": [], "train.eval_every": 4, "evaluation.limits": FEW_ITEMS}
    return str(write_variant("smoke", directory, changes, profiles=("smoke",)))


def run(spec: str, run_dir: Path, variable: str, value: str | None) -> dict:
    env = {key: item for key, item in os.environ.items() if key != variable}
    if value is not None:
        env[variable] = value
    command = [sys.executable, "-m", "platform.search", spec, "--profile", "smoke", "--validation-only"]
    command += ["--run-dir", str(run_dir)]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise SystemExit(f"the search failed ({variable}={value}):\n{done.stderr[-3000:]}")
    timings = json.loads((run_dir / "timings.json").read_text())
    return {"start_up": timings["trials"]["start_up_checkpoints_and_reports_seconds"], "wall": timings["wall_seconds"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--setting", choices=SETTINGS, default="preemption-watcher")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="keep the run directories here")
    args = parser.parse_args()
    import ray
    import torch

    base = args.keep or Path(tempfile.mkdtemp(prefix="doctune-start-up-"))
    base.mkdir(parents=True, exist_ok=True)
    spec = one_trial_spec(base)
    variable, arms = SETTINGS[args.setting]
    runs: dict[str, list[dict]] = {arm: [] for arm in arms}
    for repeat in range(args.repeats):
        for arm, value in arms.items():
            runs[arm].append(run(spec, base / f"{arm}-{repeat}", variable, value))
            print(f"repeat {repeat}, {args.setting} {arm}: {runs[arm][-1]}", file=sys.stderr, flush=True)
    print(f"Machine: {os.cpu_count()} CPUs, {platform.processor() or platform.machine()}; load {load_average()}")
    print(f"Python {platform.python_version()}, torch {torch.__version__}, ray {ray.__version__}\n")
    print(f"| {args.setting} (`{variable}`) | trial start-up, checkpoints and reports (s) | search wall (s) |")
    print("|---|---|---|")
    for arm in arms:
        start_ups = ", ".join(f"{r['start_up']:.1f}" for r in runs[arm])
        walls = ", ".join(f"{r['wall']:.1f}" for r in runs[arm])
        print(f"| {arm} | {start_ups} (median {statistics.median(r['start_up'] for r in runs[arm]):.1f}) "
              f"| {walls} (median {statistics.median(r['wall'] for r in runs[arm]):.1f}) |")  # fmt: skip
    for key in ("start_up", "wall"):
        ratios = [on[key] / off[key] for on, off in zip(runs["on"], runs["off"], strict=True)]
        spread = f"range {min(ratios):.2f} to {max(ratios):.2f}"
        print(f"\n{key}: on / off, paired: median {statistics.median(ratios):.2f} ({spread})")


if __name__ == "__main__":
    main()
