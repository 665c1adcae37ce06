"""The search-efficiency table, built from a real doctune grid search.

``build`` runs (or, when its run directory exists, resumes) ``python -m platform.search SPEC``
for a spec with ``sampler: grid`` and no early stopping, so every configuration of the grid is
trained to the last round, then ``extract`` reads every trial's checkpoints (``doctune.json``:
hyperparameters and step; ``scores.json``: each task's validation and test scores) into the table
``bench/search_efficiency.py replay`` reads: ``NAME.csv`` (one row per configuration and round,
with the validation and test objectives the spec's objective weights give) and ``NAME.json``
(steps, rounds, the grid, the ASHA settings to replay, and the command, versions, machine and
wall time that made it). A configuration whose trial failed gets empty objective cells.
"""

from __future__ import annotations

import csv
import itertools
import json
import os
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _grid(search: dict) -> dict[str, dict[str, list]]:
    """The spec's grid (``platform.samplers.grid_space``) as ``{name: {kind: values}}``."""
    from platform.samplers import grid_values
    from platform.spec import Distribution

    grid = {}
    for name, dist in search["space"].items():
        kind = dist["kind"]
        values = grid_values(Distribution(kind, tuple(dist["values"])), search["grid_points"])
        grid[name] = {kind: values}
    return grid


def _nearest(values: list, value) -> int:
    """The grid index of a trial's value (the grid sampler suggests the grid's values themselves)."""
    if isinstance(value, str) or isinstance(values[0], str):
        return values.index(value)
    return min(range(len(values)), key=lambda i: abs(values[i] - value))


def _objective(scores: dict, weights: dict[str, float], split: str) -> float:
    return sum(w * scores[task][split]["main"] for task, w in weights.items()) / sum(weights.values())


def extract(run_dir: Path, out_csv: Path, made_by: dict) -> Path:
    """Write ``out_csv`` and the JSON beside it from the finished (or partly finished) grid search
    in ``run_dir``; returns the CSV's path."""
    summary = json.loads((run_dir / "search.json").read_text())
    spec = summary["resolved_spec"]
    search, train = spec["search"], spec["train"]
    if search["sampler"] != "grid" or (search["scheduler"]["asha"] is not None):
        raise SystemExit(f"{run_dir}: the table needs a grid search without early stopping (sampler: grid, asha: null)")
    objective = search["objective"]
    weights = objective["tasks"] or next(iter(objective["objectives"].values()))
    grid = _grid(search)
    names = list(grid)
    values = [next(iter(grid[n].values())) for n in names]
    rounds = -(-train["steps"] // train["eval_every"])
    cells: dict[tuple[int, ...], dict[int, tuple[float, float]]] = {}
    for record_file in sorted(run_dir.glob("trials/*/checkpoints/step_*/doctune.json")):
        scores_file = record_file.with_name("scores.json")
        if not scores_file.exists():
            continue
        record = json.loads(record_file.read_text())
        point = tuple(_nearest(values[i], record["hyperparameters"][n]) for i, n in enumerate(names))
        scores = json.loads(scores_file.read_text())
        round_ = -(-record["step"] // train["eval_every"])
        cells.setdefault(point, {})[round_] = (_objective(scores, weights, "val"), _objective(scores, weights, "test"))
    out_csv.parent.mkdir(parents=True, exist_ok=True)
    with out_csv.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["config", "round", "step", "val_objective", "test_objective", *(f"hp.{n}" for n in names)])
        for config, point in enumerate(itertools.product(*(range(len(v)) for v in values))):
            for round_ in range(1, rounds + 1):
                val, test = cells.get(point, {}).get(round_, ("", ""))
                hp = [values[i][j] for i, j in enumerate(point)]
                writer.writerow([config, round_, round_ * train["eval_every"], val, test, *hp])
    asha = {"grace_period": 1, "reduction_factor": 2}  # AshaSpec's defaults, the ones a search replays
    meta = {
        "name": out_csv.stem,
        "steps": rounds * train["eval_every"],
        "eval_every": train["eval_every"],
        "rounds": rounds,
        "space": grid,
        "asha": asha,
        "objective": weights,
        "configurations_trained": len(cells),
        "made_by": made_by,
    }
    out_csv.with_suffix(".json").write_text(json.dumps(meta, indent=2) + "\n")
    return out_csv


def _machine() -> str:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if "model name" in line
        ),
        "unknown CPU",
    )
    gpus = "no GPU"
    try:
        import torch

        if torch.cuda.is_available():
            gpus = f"{torch.cuda.device_count()} x {torch.cuda.get_device_name(0)}"
    except ImportError:
        pass
    return f"{os.cpu_count()} CPUs ({cpu}), {gpus}"


def _versions() -> dict[str, str]:
    from importlib.metadata import version

    versions = {"python": sys.version.split()[0]}
    for package in ("torch", "ray", "optuna", "transformers"):
        versions[package] = version(package)
    return versions


def build(spec: Path, run_dir: Path, out_csv: Path, profile: str) -> Path:
    """Run or resume the grid search, then extract its table."""
    command = [sys.executable, "-m", "platform.search", str(spec), "--profile", profile, "--run-dir", str(run_dir)]
    resume = ["--resume"] if (run_dir / "search.json").exists() else []
    began = time.monotonic()
    done = subprocess.run([*command, *resume], cwd=ROOT, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    if done.returncode != 0:
        print(f"search ended with exit code {done.returncode}; extracting what finished", file=sys.stderr)
    timings = run_dir / "timings.json"
    made_by = {
        "command": f"python bench/search_efficiency.py build --spec {spec} --profile {profile}",
        "search": " ".join(["python -m platform.search", str(spec), "--profile", profile]),
        "versions": _versions(),
        "machine": _machine(),
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
        "search_wall_seconds": json.loads(timings.read_text()).get("wall_seconds") if timings.exists() else None,
        "this_call_seconds": round(time.monotonic() - began),
    }
    return extract(run_dir, out_csv, made_by)
