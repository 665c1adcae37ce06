"""Wall time of whole searches, end to end through ``scripts/search.sh`` (Ray start to exported winner).

    python bench/search_wall_time.py [--spec docsplit_long] [--profile local] [--repeats 1] [--clone]
        [--keep DIR]

Every search runs with ``--validation-only``: a run made to measure reads no locked test part
(docs/decisions/locked-test-parts.md); the locked part's own cost is stated from its one recorded
development reading. Prints a Markdown block (machine, versions, the load present, median wall time,
trials, the winner's and the baseline rows' validation objectives, disk use of the run directory,
and where the wall time went: the search's own ``timings.json``, its overhead share against the 5%
bar) for bench/RESULTS.md.

``--clone`` runs the searches as a new user would: in a fresh ``git clone`` of this checkout's HEAD,
whose ``scripts/setup.sh`` first builds its own ``.venv`` (timed and reported apart). Each run uses
a fresh run directory (under ``--keep DIR`` if given, else a temporary one); the data cache is warm
after the first run on a machine, as for a user. Under ``--keep``, each finished run's measurement
is written beside its run directory (``run-N.json``, with the commit it ran) and read back when the
command is started again: an interrupted series goes on with its next run, the one cut short rerun.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the project's ``platform``: the stdlib module's names, and the driver's submodules

from child import gpus  # noqa: E402  bench/child.py, beside this script

import platform  # noqa: E402

# the locked test part's cost, from the one development reading that recorded its phase (the local profile, warm;
# bench/locked-part-readings.md): these runs read validation only
LOCKED_PHASE = "locked test part"
RECORDED_LOCKED_SECONDS, RECORDED_LOCKED_COMMIT = 109, "e8c99d6"


def load_average() -> str:
    """The 1-minute load average and what counts as load on this machine (its CPUs)."""
    one, five, _ = Path("/proc/loadavg").read_text().split()[:3]
    return f"{one} (5 min: {five}) on {os.cpu_count()} CPUs"


def disk_use(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def clone_checkout(into: Path) -> tuple[Path, float]:
    """A fresh clone of HEAD with its own .venv built by scripts/setup.sh; (checkout, setup seconds)."""
    checkout = into / "doctune"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(checkout)], check=True)
    began = time.perf_counter()
    subprocess.run(["bash", str(checkout / "scripts" / "setup.sh")], check=True)
    return checkout, time.perf_counter() - began


def kept_run(checkout: Path, spec: str, profile: str, run_dir: Path) -> dict:
    """``one_run``'s measurement, read back from ``run_dir``'s ``.json`` beside it where an earlier
    call finished that run; else measured now (a run directory left by an interrupted run removed
    first) and written there."""
    record = run_dir.with_suffix(".json")
    if record.is_file():
        return json.loads(record.read_text())
    if run_dir.exists():
        shutil.rmtree(run_dir)
    run = one_run(checkout, spec, profile, run_dir)
    record.write_text(json.dumps(run))
    return run


def one_run(checkout: Path, spec: str, profile: str, run_dir: Path) -> dict:
    load_before = load_average()
    began = time.perf_counter()
    done = subprocess.run(
        # a run made to measure reads no locked test part (docs/decisions/locked-test-parts.md)
        [
            "bash",
            str(checkout / "scripts" / "search.sh"),
            spec,
            "--validation-only",
            "--profile",
            profile,
            "--run-dir",
            str(run_dir),
        ],
        cwd=checkout,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - began
    (run_dir / "search.out").write_text(done.stdout)  # the search's own summary, its verdicts, beside its files
    if done.returncode != 0:
        raise SystemExit(f"search failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return {
        "wall": wall,
        "load": f"before {load_before}; after {load_average()}",
        **json.loads((run_dir / "leaderboard.json").read_text()),  # rows, noise
        "timings": json.loads((run_dir / "timings.json").read_text()),
        # the commit the search recorded itself (``-dirty`` where the checkout had changes)
        "commit": json.loads((run_dir / "search.json").read_text())["environment"]["git_commit"],
        "disk": disk_use(run_dir),
        # what train.keep_checkpoints freed as trials ended (each trial's released.json)
        "released": sum(json.loads(f.read_text())["bytes"] for f in run_dir.glob("trials/*/released.json")),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spec", default="docsplit_long")
    parser.add_argument("--profile", default="local")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--clone", action="store_true", help="run in a fresh clone of HEAD with its own .venv")
    parser.add_argument("--keep", type=Path, help="keep the run directories here (run-1, run-2, ...)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        checkout, setup_seconds = clone_checkout(Path(tmp)) if args.clone else (ROOT, None)
        runs_under = args.keep or Path(tmp) / "runs"
        runs_under.mkdir(parents=True, exist_ok=True)
        runs = [kept_run(checkout, args.spec, args.profile, runs_under / f"run-{i + 1}") for i in range(args.repeats)]
    report(args, runs, setup_seconds)


def _number(value: float | None) -> str:
    return "–" if value is None else f"{value:.4f}"  # BM25 has no objective where a probe counts


def report(args: argparse.Namespace, runs: list[dict], setup_seconds: float | None) -> None:
    from evaluators.references import REFERENCE_PREFIX
    from platform.results.leaderboard import BASELINE_ID

    walls = [run["wall"] for run in runs]
    rows, timings = runs[-1]["rows"], runs[-1]["timings"]
    baselines = [r for r in rows if r["trial"].startswith((BASELINE_ID, REFERENCE_PREFIX))]  # and the references
    trials = [r for r in rows if r not in baselines]
    best = max((r for r in trials if r["objective"] is not None), key=lambda r: r["objective"])

    import ray
    import torch

    print(f"### `{args.spec}` at `--profile {args.profile}`\n")
    print(
        f"- machine: {os.cpu_count()} CPUs, {platform.machine()}, {gpus()}; Python {platform.python_version()}, "
        f"torch {torch.__version__}, ray {ray.__version__}; {time.strftime('%Y-%m-%d')}"
    )
    if setup_seconds is not None:
        print(f"- a fresh clone of HEAD; its `scripts/setup.sh` built the .venv in {setup_seconds:.0f} s (not counted)")
    print(
        f"- wall time, median of {len(walls)}: {statistics.median(walls):.0f} s "
        f"(runs: {', '.join(f'{w:.0f}' for w in walls)})"
    )
    for i, run in enumerate(runs, 1):
        print(f"- run {i}: commit {run['commit']}, load average {run['load']}")
    disks = [run["disk"] / 1e6 for run in runs]
    per_run = ", ".join(f"{d:.0f}" for d in disks)
    print(f"- run directory on disk, median: {statistics.median(disks):.0f} MB (runs: {per_run})")
    kept_all = [(run["disk"] + run["released"]) / 1e6 for run in runs]
    print(
        f"- the same without releasing ended trials' checkpoints (on disk + each trial's released.json), median: "
        f"{statistics.median(kept_all):.0f} MB (runs: {', '.join(f'{d:.0f}' for d in kept_all)})"
    )
    statuses = Counter(r["status"].split(" (")[0] for r in trials)
    print(f"- trials: {len(trials)} ({', '.join(f'{n} {s}' for s, n in sorted(statuses.items()))})")
    overheads = [run["timings"]["shares"]["overhead"] for run in runs]
    print(
        f"- overhead share (neither training steps, evaluation nor base stage; bar <= 5%), median of "
        f"{len(runs)}: {statistics.median(overheads):.1%} (runs: {', '.join(f'{o:.1%}' for o in overheads)})"
    )
    print("\nThe last run's leaderboard (validation only: the searches read no locked test part):\n")
    print("| row | validation objective |")
    print("|---|---|")
    for row in [best, *baselines]:
        print(f"| {row['trial']} | {_number(row['objective'])} |")
    print(
        f"\nA search that reads its locked part (a user's default search) adds the phase '{LOCKED_PHASE}': "
        f"{RECORDED_LOCKED_SECONDS} s in the reading recorded at {RECORDED_LOCKED_COMMIT} "
        "(bench/locked-part-readings.md).\n"
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
