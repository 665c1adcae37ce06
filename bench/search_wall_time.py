"""Wall time of whole searches, end to end through ``scripts/search.sh`` (Ray start to exported winner).

    python bench/search_wall_time.py [--spec docsplit_long] [--profile local] [--repeats 1] [--clone]
        [--keep DIR] [--out FILE]

Every search runs with ``--validation-only``: a run made to measure reads no locked test part
(docs/decisions/locked-test-parts.md); the locked part's own cost is stated from the one development
reading whose phases were recorded (``LOCKED_PART``). Writes ``--out``
(bench/results/search_wall_time.json: each run's wall time, commit, load, disk use, ``timings.json``
and the winner's and baselines' validation objectives) and prints it as Markdown tables
(``runs_table``, ``phases_table``).

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
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the project's ``platform``: the stdlib module's names, and the driver's submodules

from child import gpus  # noqa: E402  bench/child.py, beside this script

import platform  # noqa: E402

# the locked test part's cost, from the one development reading whose phases were recorded (the local profile,
# warm, at e8c99d6: bench/locked-part-readings.md, readings 3-6): these runs read validation only
LOCKED_PART = {"phase": "locked test part", "seconds": 109, "commit": "e8c99d6"}


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
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "search_wall_time.json")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        checkout, setup_seconds = clone_checkout(Path(tmp)) if args.clone else (ROOT, None)
        runs_under = args.keep or Path(tmp) / "runs"
        runs_under.mkdir(parents=True, exist_ok=True)
        runs = [kept_run(checkout, args.spec, args.profile, runs_under / f"run-{i + 1}") for i in range(args.repeats)]
    record = measurement(args, runs, setup_seconds)
    args.out.write_text(json.dumps(record, indent=1))
    print("\n".join(runs_table(record)) + "\n")
    print("\n".join(phases_table(record)))


def measurement(args: argparse.Namespace, runs: list[dict], setup_seconds: float | None) -> dict:
    """What the results keep of the runs: each run's wall time, commit, load, disk use, its
    ``timings.json`` and the winner's and baseline rows' validation objectives."""
    import ray
    import torch

    from evaluators.references import row_kind
    from platform.cluster.environment import cpu_model

    kept = []
    for run in runs:
        scored = [r for r in run["rows"] if row_kind(r["trial"]) == "trial" and r["objective"] is not None]
        best = max(scored, key=lambda r: r["objective"])
        baselines = {r["trial"]: r["objective"] for r in run["rows"] if row_kind(r["trial"]) == "baseline"}
        kept.append(
            {key: run[key] for key in ("wall", "load", "commit", "disk", "released", "timings")}
            | {"winner": {"trial": best["trial"], "objective": best["objective"]}, "baselines": baselines}
        )
    return {
        "spec": args.spec,
        "profile": args.profile,
        "machine": f"{os.cpu_count()} CPUs ({cpu_model()}), {gpus()}",
        "versions": {"python": platform.python_version(), "torch": torch.__version__, "ray": ray.__version__},
        "date": time.strftime("%Y-%m-%d"),
        "setup_seconds": setup_seconds,
        "locked_part": LOCKED_PART,
        "runs": kept,
    }


def runs_table(record: dict) -> list[str]:
    """Each run: its commit, wall seconds, and the shares of training, scoring and overhead in it
    (its ``timings.json``)."""
    from bench.markdown import table

    rows = []
    for index, run in enumerate(record["runs"], 1):
        shares = run["timings"]["shares"]
        commit = run["commit"][:7] + ("-dirty" if run["commit"].endswith("-dirty") else "")
        rows.append([str(index), commit, f"{run['wall']:,.0f}", *(f"{v:.1%}" for v in shares.values())])
    shares = list(record["runs"][0]["timings"]["shares"])
    return table(["run", "commit", "wall seconds", *shares], rows, numeric=range(2, 3 + len(shares)))


def phases_table(record: dict) -> list[str]:
    """The last run's driver phases and their seconds (its ``timings.json``)."""
    from bench.markdown import table

    phases = record["runs"][-1]["timings"]["phases"]
    return table(["driver phase", "seconds"], [[phase, f"{seconds:,.1f}"] for phase, seconds in phases.items()], (1,))


if __name__ == "__main__":
    main()
