"""How many scoring items a task needs before its noise stops hiding the differences between trials.

    .venv/bin/python bench/ranking_noise.py RUN_DIR [RUN_DIR ...] [--out bench/results/ranking_noise.json]

Reads finished searches (their ``leaderboard.json`` and embedding caches; nothing is trained or
embedded again) and, for each objective task on its validation part, from every scored trial's
chosen checkpoint:

- ``sigma``: the noise of a difference between two trials per item, the standard error of their
  paired difference (a joint bootstrap over the part's items, and a probe's draws, as the search
  itself measures it: ``doctune_core.noise``) times the square root of the items; the median over
  pairs of trials. A difference's standard error at ``n`` items is ``sigma / sqrt(n)``;
- ``spread``: the trials' spread on that task once noise is taken out (``Spread.true_spread``),
  and the typical difference between two trials, ``spread * sqrt(2)``;
- ``min_items``: the part size at which a difference as large as that typical one is found beyond
  noise (a paired two-sided test at 5%) with 80% probability, ``((1.96 + 0.84) * sigma /
  typical difference)^2`` (``evaluators.tasks.base.PartSizeReference.min_items``, the search's warning).

Prints a Markdown table and writes the figures as JSON; the tasks they were measured on declare them
(``Task.part_size_reference``, kept equal to the checked-in JSON by a test), and the search warns
from them before parts too small (``evaluators/part_sizes.py``).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if __name__ == "__main__":  # the project's ``platform`` package must come before the stdlib's
    sys.path.insert(0, str(ROOT))
if not hasattr(sys.modules.get("platform"), "__path__"):
    sys.modules.pop("platform", None)

from bench.markdown import table  # noqa: E402


def _evaluator(run_dir: Path, summary: dict):
    from evaluators.plan import EvalBudget, EvalPlan
    from evaluators.pool import Evaluator

    spec = summary["resolved_spec"]
    evaluation = spec["evaluation"]
    objective = spec["search"]["objective"]
    weights = objective.get("tasks") or next(iter(objective["objectives"].values()))
    plan = EvalPlan(
        objectives={"objective": weights},
        actor_names=("bench",),
        namespace="bench",
        budget=EvalBudget(**evaluation["limits"]),
        max_length=evaluation["max_length"],
        batch_size=evaluation["batch_size"],
        threads=evaluation["threads"],
    )
    return Evaluator(plan, str(run_dir)), list(weights)


def measure(run_dir: Path) -> dict:
    """Per objective task: items, ``sigma``, ``spread``, ``typical_difference`` and ``min_items``."""
    from doctune_core.noise import joint_resamples, spread_test
    from evaluators.leaderboard import Leaderboard, is_baseline
    from evaluators.tasks.base import PartSizeReference

    summary = json.loads((run_dir / "search.json").read_text())
    rows = Leaderboard.read(run_dir).rows
    trials = [r for r in rows if not is_baseline(r) and r.objective is not None and r.checkpoint]
    if len(trials) < 2:
        raise SystemExit(f"{run_dir}: fewer than two scored trials")
    evaluator, tasks = _evaluator(run_dir, summary)
    outcomes = [evaluator.outcomes(r.checkpoint, r.hyperparameters["pooling"], tasks, "val") for r in trials]
    figures = {}
    for task in tasks:
        per_trial = [{task: o[task]} for o in outcomes]
        observed, resampled = joint_resamples(per_trial, {task: 1.0})
        spread = spread_test(observed, resampled)
        items = len(outcomes[0][task].items)
        sigma = spread.difference_se * math.sqrt(items)
        typical = spread.true_spread * math.sqrt(2)
        figures[task] = {
            "items": items,
            "trials": len(trials),
            "sigma": sigma,
            "spread": spread.true_spread,
            "typical_difference": typical,
            "min_items": PartSizeReference(sigma, typical).min_items if typical > 0 else None,
        }
    return {"run": f"{run_dir.parent.name}/{run_dir.name}", "profile": summary.get("profile"), "tasks": figures}


def combine(runs: list[dict]) -> dict[str, dict]:
    """Per task, the median of ``sigma`` and of the typical difference over the runs that scored it,
    and the part size those medians need."""
    from evaluators.tasks.base import PartSizeReference

    combined: dict[str, dict] = {}
    for task in dict.fromkeys(t for run in runs for t in run["tasks"]):
        seen = [run["tasks"][task] for run in runs if task in run["tasks"]]
        sigma = statistics.median(s["sigma"] for s in seen)
        typical = statistics.median(s["typical_difference"] for s in seen)
        combined[task] = {
            "runs": len(seen),
            "sigma": sigma,
            "typical_difference": typical,
            "min_items": PartSizeReference(sigma, typical).min_items if typical > 0 else None,
        }
    return combined


def noise_table(record: dict) -> list[str]:
    """Per task and search: the items a part held, sigma (a paired difference's per-item noise), the
    typical difference between two trials and the items a part needs; then the median over searches."""
    rows = []
    for task, figures in record["tasks"].items():
        for index, run in enumerate(record["runs"]):
            own = run["tasks"][task]
            needed = own["min_items"] if own["min_items"] is not None else "none (no spread)"
            row = [task, f"search {index + 1}", str(own["items"]), f"{own['sigma']:.3f}"]
            rows.append([*row, f"{own['typical_difference']:.4f}", str(needed)])
        needed = figures["min_items"] if figures["min_items"] is not None else "none (no spread)"
        row = [task, "median", "", f"{figures['sigma']:.3f}", f"{figures['typical_difference']:.4f}"]
        rows.append([*row, f"**{needed}**"])
    header = ["task", "search", "items a part", "sigma (per item)", "typical difference", "items needed a part"]
    return table(header, rows, numeric=range(2, 6))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dirs", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "ranking_noise.json")
    args = parser.parse_args(argv)
    runs = [measure(run_dir) for run_dir in args.run_dirs]
    combined = combine(runs)
    print("\n".join(noise_table({"runs": runs, "tasks": combined})))
    args.out.write_text(json.dumps({"runs": runs, "tasks": combined}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
