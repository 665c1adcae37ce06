"""A study's table: each row's scores over seeds as ``study.md`` (mean ± sample std), ``study.csv``,
``study.json`` and ``study.png``; rows ranked on the validation parts, every cell a test score (a
validation score in a study that reads no test part, ``--validation-only``)."""

from __future__ import annotations

import csv
import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from evaluators.scores import main_scores, part
from platform.rundir.layout import write_atomic
from platform.spec import SearchSpec


@dataclass
class RowResult:
    """One row's scores: per seed, task -> metric -> value; with ``study.rounds``, per seed the
    validation scores of every round, by step."""

    name: str
    hyperparameters: dict
    seeds: dict[int, dict[str, dict[str, float]]]
    failed: dict[int, str]
    rounds: dict[int, dict[int, dict]] = field(default_factory=dict)

    def objective_by_step(self, weights: dict[str, float]) -> dict[int, list[float]]:
        """Step -> the validation objective (``weights``' tasks' main scores) of each seed's round there."""
        by_step: dict[int, list[float]] = {}
        for rounds in self.rounds.values():
            for step, scores in rounds.items():
                mains = main_scores(scores, "val")
                if all(t in mains for t in weights):
                    objective = sum(w * mains[t] for t, w in weights.items()) / sum(weights.values())
                    by_step.setdefault(step, []).append(objective)
        return dict(sorted(by_step.items()))

    def values(self, task: str, metric: str, shown: str = "test") -> list[float]:
        """The metric's scores on the ``shown`` part, one per seed that has it."""
        return [s[task][shown][metric] for s in self.seeds.values() if metric in part(s, task, shown)]


def _learning_curves(rows: list[RowResult], spec: SearchSpec) -> list[str]:
    """With ``study.rounds``: each row's validation objective at each round's step, mean ± sample std
    over seeds (the rounds score the objective's tasks only)."""
    weights = spec.search.objective.tasks  # empty for several objectives (objectives:): no one curve
    curves = {row.name: curve for row in rows if weights and (curve := row.objective_by_step(weights))}
    if not curves:
        return []
    steps = sorted({step for curve in curves.values() for step in curve})
    return [
        "",
        f"Validation objective ({', '.join(f'{t} {w:g}' for t, w in weights.items())}) at each round, mean ± sample "
        "std over seeds: the rows' learning curves.",
        "",
        "| row | " + " | ".join(f"step {s}" for s in steps) + " |",
        "|---|" + "---|" * len(steps),
        *(f"| {name} | " + " | ".join(_cell(curve.get(s, [])) for s in steps) + " |" for name, curve in curves.items()),
    ]


def rank_rows(rows, evaluation) -> list[str]:
    """Row names, best first, by the spec's objective on the validation parts, averaged over seeds
    (the table then shows test scores: what picks the tuned rows never reports them)."""
    means = {}
    for row in rows:
        values = [
            evaluation.objective_of(main_scores({t: scores[t] for t in evaluation.tasks}, "val"))
            for scores in row.seeds.values()
        ]
        if values:
            means[row.name] = statistics.fmean(values)
    return sorted(means, key=means.get, reverse=True)


def column_label(task: str, metric: str) -> str:
    shown = task.split(":", 1)[0] + ":" + Path(task.split(":", 1)[1]).name if ":" in task else task
    return f"{shown} {metric}"


def _stats(values: list[float]) -> dict:
    return {
        "mean": statistics.fmean(values),
        "std": statistics.stdev(values) if len(values) > 1 else 0.0,
        "n": len(values),
    }


def _cell(values: list[float]) -> str:
    if not values:
        return "—"
    if len(values) == 1:
        return f"{values[0]:.4f}"
    return f"{statistics.fmean(values):.4f} ± {statistics.stdev(values):.4f}"


def write_table(
    rows: list[RowResult], columns: list[tuple[str, str]], run_dir: Path, spec: SearchSpec, shown: str = "test"
) -> list[dict]:
    """study.md (mean ± sample std over seeds), study.csv and study.json, every cell a score on the
    ``shown`` part; study.json's rows (each column's statistics by ``column_label``), which the
    study's chart draws (``platform.report.plots.study_bars``)."""
    header = ["row", "seeds", *(column_label(t, m) for t, m in columns)]
    train = spec.train
    parts = (
        "Every score is on the tasks' test parts; the rows to tune, and each tuned row's configuration, were "
        "chosen on the validation parts."
        if shown == "test"
        else "Every score is on the tasks' validation parts; no test part was read."
    )
    lines = [
        f"Study `{spec.name}`: base `{spec.base_model}`, corpus `{spec.corpus.source}`, {train.steps} steps of "
        f"{train.batch_size} pairs at {train.max_length} tokens per row and seed; mean ± sample std over seeds. "
        + parts,
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    for row in rows:
        seeds = str(len(row.seeds)) + (f" ({len(row.failed)} failed)" if row.failed else "")
        lines.append("| " + " | ".join([row.name, seeds, *(_cell(row.values(t, m, shown)) for t, m in columns)]) + " |")
    lines += _learning_curves(rows, spec)
    write_atomic(run_dir / "study.md", "\n".join(lines) + "\n")
    with (run_dir / "study.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["row", "seed", *(column_label(t, m) for t, m in columns)])
        for row in rows:
            for seed, scores in row.seeds.items():
                writer.writerow([row.name, seed, *(part(scores, t, shown).get(m) for t, m in columns)])
    summary = [
        {
            "row": row.name,
            "hyperparameters": row.hyperparameters,
            "failed": row.failed,
            "columns": {column_label(t, m): _stats(v) for t, m in columns if (v := row.values(t, m, shown))},
        }
        for row in rows
    ]
    write_atomic(run_dir / "study.json", json.dumps(summary, indent=2))
    return summary
