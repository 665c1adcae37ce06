"""The end of a search: the leaderboard (terminal, CSV, JSON) and its winner.

Exporting the winner to ``best/`` (and any trial elsewhere) is ``platform.export``.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

BASELINE_ID = "baseline"


@dataclass
class Row:
    trial: str
    status: str
    objective: float | None
    step: int | None
    checkpoint: str | None
    hyperparameters: dict
    scores: dict[str, dict[str, float]] = field(default_factory=dict)

    def flat(self, tasks: list[str]) -> dict:
        out = {
            "trial": self.trial,
            "status": self.status,
            "objective": self.objective,
            "step": self.step,
            "checkpoint": self.checkpoint,
        }
        out |= {f"hp.{k}": v for k, v in sorted(self.hyperparameters.items())}
        out |= {task: self.scores.get(task, {}).get("main") for task in tasks}
        return out


def _scores_from_metrics(metrics: dict, tasks: tuple[str, ...]) -> dict[str, dict[str, float]]:
    """``{"task/metric": value}`` report entries back into ``{task: {metric: value}}``."""
    scores: dict[str, dict[str, float]] = {}
    for key, value in metrics.items():
        task, _, metric = str(key).rpartition("/")
        if task in tasks and isinstance(value, (int, float)):
            scores.setdefault(task, {})[metric] = float(value)
    return scores


def rows_from_results(results, resolved) -> list[Row]:
    """One row per trial: its best evaluation round, or its error."""
    rows = []
    fixed = asdict(resolved.fixed)
    for result in results:
        trial_id = Path(result.path).name if result.path else "?"
        frame = result.metrics_dataframe
        if frame is not None and "trial_id" in frame.columns and len(frame):
            trial_id = str(frame["trial_id"].iloc[-1])
        hp = {**fixed, **{k: v for k, v in (result.config or {}).items() if k in fixed}}
        if frame is None or "objective" not in frame.columns or frame["objective"].dropna().empty:
            reason = str(result.error).strip().splitlines()[-1][:300] if result.error else "no evaluation reported"
            rows.append(Row(trial_id, f"error: {reason}", None, None, None, hp))
            continue
        best = frame.loc[frame["objective"].idxmax()].to_dict()
        rounds = int(frame["eval_round"].max())
        if result.error:
            status = f"error after round {rounds}: {str(result.error).strip().splitlines()[-1][:200]}"
        elif rounds < resolved.plan.eval_rounds:
            status = f"stopped early (round {rounds}/{resolved.plan.eval_rounds})"
        else:
            status = "completed"
        rows.append(
            Row(
                trial_id,
                status,
                float(best["objective"]),
                int(best["step"]),
                best.get("checkpoint"),
                hp,
                _scores_from_metrics(best, resolved.plan.evaluation.tasks),
            )
        )
    return rows


def baseline_row(baseline: dict, resolved) -> Row:
    main = {task: values["main"] for task, values in baseline.items() if task in resolved.plan.evaluation.objective}
    objective = resolved.plan.evaluation.objective_of(main)
    return Row(
        BASELINE_ID,
        "base model, untouched",
        objective,
        0,
        resolved.plan.base_model,
        {"pooling": resolved.fixed.pooling},
        baseline,
    )


def _rank_key(row: Row) -> float:
    return -row.objective if row.objective is not None and math.isfinite(row.objective) else math.inf


def write_leaderboard(rows: list[Row], run_dir: Path, tasks: list[str]) -> list[Row]:
    rows = sorted(rows, key=_rank_key)
    flat = [row.flat(tasks) for row in rows]
    columns = list(dict.fromkeys(key for record in flat for key in record))
    with (run_dir / "leaderboard.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(flat)
    (run_dir / "leaderboard.json").write_text(json.dumps([asdict(row) for row in rows], indent=2))
    return rows


def format_table(rows: list[Row], tasks: list[str]) -> str:
    header = ["rank", "trial", "objective", *tasks, "status"]
    lines = [header]
    for rank, row in enumerate(rows, start=1):
        score = lambda v: f"{v:.4f}" if isinstance(v, float) else "-"  # noqa: E731
        lines.append(
            [
                str(rank),
                row.trial,
                score(row.objective),
                *(score(row.scores.get(t, {}).get("main")) for t in tasks),
                row.status,
            ]
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in lines)


def winner(rows: list[Row]) -> Row | None:
    """The best scored trial of a ranked leaderboard (the baseline may rank above it, but is no trial)."""
    return next((r for r in rows if r.trial != BASELINE_ID and r.objective is not None), None)
