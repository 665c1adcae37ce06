"""The report's figures, drawn from plain data (leaderboard rows, per-trial histories, importances).

Each function returns a matplotlib ``Figure`` built without pyplot (no global state, no GUI
backend: ``save_png`` renders through Agg), so the driver can draw them in the search process
and the tests can call them on data of their own. Every objective and main score is higher-is-better.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from evaluators.leaderboard import BASELINE_ID, LeaderboardRow, is_baseline
from evaluators.lengths import BUCKET_LABELS, bucket_title
from evaluators.scores import part, strata
from platform.report.run import PlotSkipped

SIZE = (8.0, 5.0)  # inches; at DPI, 960 x 600 pixels
DPI = 120
TOP_TRIALS = 5  # trials drawn in colour (the rest of the timeline is grey) and in the task-score bars
LABEL_CHARS = 18  # longer trial ids and task names are trimmed so tick labels and legends stay apart
BASELINE_COLOR = "0.35"


def short(text: str, limit: int = LABEL_CHARS) -> str:
    """``text`` cut to ``limit`` characters, with an ellipsis where it was cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def save_png(figure: Figure, path: Path) -> None:
    """Write ``figure`` as a PNG at the report's resolution."""
    figure.savefig(path, format="png", dpi=DPI)


def _figure() -> Figure:
    # constrained layout keeps titles, rotated tick labels and outside legends from overlapping
    return Figure(figsize=SIZE, layout="constrained")


def top_trials(rows: Sequence[LeaderboardRow], n: int = TOP_TRIALS) -> list[LeaderboardRow]:
    """The ``n`` scored trials with the highest objective (the baseline is no trial)."""
    scored = [r for r in rows if not is_baseline(r) and r.objective is not None]
    return sorted(scored, key=lambda r: r.objective, reverse=True)[:n]


def objective_over_time(
    histories: Mapping[str, pd.DataFrame],
    start: float,
    baseline: float | None,
    highlight: Sequence[str] = (),
    objective: str = "objective",
) -> Figure:
    """The objective of every evaluation round against wall-clock time, one line per trial.

    ``histories`` maps a trial id to its rounds (columns ``timestamp``, Unix seconds, and
    ``objective``); ``start`` is the Unix time the x axis counts from. Trials in ``highlight``
    (the leaders) are coloured and named in the legend; the others are drawn thin and grey, so a
    search of many trials stays legible. ``baseline`` (the base model's objective) is a dashed line.
    ``objective`` names what is plotted (with several objectives, the first one, which ranks).
    """
    figure = _figure()
    axes = figure.subplots()
    for trial in (t for t in highlight if t in histories):
        frame = histories[trial]
        minutes = (frame["timestamp"] - start) / 60
        axes.plot(minutes, frame["objective"], linewidth=2, marker="o", label=short(trial), zorder=2)
    others = [t for t in histories if t not in highlight]
    for i, trial in enumerate(others):
        frame = histories[trial]
        minutes = (frame["timestamp"] - start) / 60
        label = f"other trials ({len(others)})" if i == 0 else None
        axes.plot(minutes, frame["objective"], color="0.7", linewidth=1, marker=".", label=label, zorder=1)
    if baseline is not None:
        axes.axhline(baseline, color=BASELINE_COLOR, linestyle="--", linewidth=1.5, label="baseline (base model)")
    axes.set_title(f"{objective[0].upper()}{objective[1:]} per evaluation round")
    axes.set_xlim(left=0)
    axes.set_xlabel("minutes since the first trial started")
    axes.set_ylabel(f"{short(objective, 40)}, higher is better")
    axes.grid(alpha=0.3)
    axes.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize="small", title="trial")
    return figure


def task_scores(rows: Sequence[LeaderboardRow], tasks: Sequence[str], n: int = TOP_TRIALS) -> Figure:
    """Grouped bars of each task's main test score: the ``n`` best trials (by the validation
    objective) and the baseline rows, one group per task, with standard-error whiskers."""
    trials = top_trials(rows, n)
    baseline = [r for r in rows if is_baseline(r)]
    drawn = trials + baseline
    figure = _figure()
    axes = figure.subplots()
    width = 0.8 / len(drawn)
    for i, row in enumerate(drawn):
        positions = [t + (i - (len(drawn) - 1) / 2) * width for t in range(len(tasks))]
        heights = [part(row.scores, task, "test").get("main", float("nan")) for task in tasks]
        errors = [part(row.scores, task, "test").get("main_se", 0.0) for task in tasks]
        if is_baseline(row):
            label = row.trial + (f" ({row.objective:.3f})" if row.objective is not None else "")
            style = {"color": "white", "edgecolor": BASELINE_COLOR, "hatch": "//", "label": label}
        else:
            style = {"label": f"{short(row.trial)} ({row.objective:.3f})"}
        axes.bar(positions, heights, width, yerr=errors, capsize=2, **style)
    axes.set_xticks(range(len(tasks)), [short(t, 24) for t in tasks], rotation=20, ha="right")
    axes.axhline(0, color="black", linewidth=0.8)
    axes.set_title(
        f"Main test score per task: the {len(trials)} best trials" + (" and the baselines" if baseline else "")
    )
    axes.set_ylabel("main test score ± standard error (higher is better)")
    axes.grid(axis="y", alpha=0.3)
    axes.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize="small", title="trial (val. objective)")
    return figure


def length_buckets(row: LeaderboardRow, task: str) -> dict[str, dict[str, float]]:
    """A row's test scores on ``task`` per length bucket of the documents to find (``len_*`` strata)."""
    return {label: v for label, v in strata(part(row.scores, task, "test")).items() if label in BUCKET_LABELS}


def score_by_length(rows: Sequence[LeaderboardRow], tasks: Sequence[str]) -> Figure:
    """Each task's main test score against the length of the documents to find (the retrieval
    tasks' length buckets), one panel per task: the winner, the baseline rows and the reference
    rows, each point with its 95% interval (± 1.96 standard errors over that bucket's queries)."""
    best = next(iter(top_trials(rows, 1)), None)
    drawn = ([best] if best else []) + [r for r in rows if is_baseline(r)]
    tasks = [t for t in tasks if any(length_buckets(r, t) for r in drawn)]
    if not tasks:
        raise PlotSkipped("no task reports scores by document length (only retrieval tasks do)")
    figure = _figure()
    panels = figure.subplots(1, len(tasks), squeeze=False)[0]
    for axes, task in zip(panels, tasks):
        labels = [b for b in BUCKET_LABELS if any(b in length_buckets(r, task) for r in drawn)]
        for i, row in enumerate(drawn):
            buckets = length_buckets(row, task)
            if not buckets:
                continue
            xs = [labels.index(b) + (i - (len(drawn) - 1) / 2) * 0.06 for b in buckets]
            style = {"linestyle": "--"} if is_baseline(row) else {"linewidth": 2.5}
            axes.errorbar(
                xs,
                [v["main"] for v in buckets.values()],
                yerr=[1.96 * v["se"] for v in buckets.values()],
                marker="o",
                capsize=2,
                label=f"{short(row.trial, 36)}{' (winner)' if row is best else ''}",
                **style,
            )
        axes.set_xticks(range(len(labels)), [bucket_title(b) for b in labels])
        axes.set_title(short(task, 32), fontsize="medium")
        axes.set_xlabel("tokens of the document to find")
        axes.grid(alpha=0.3)
    panels[0].set_ylabel("main test score, 95% interval")
    panels[-1].legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize="small")
    figure.suptitle("Score against document length: the winner, the baselines and the references")
    return figure


def param_importance(importances: Mapping[str, float], target: str) -> Figure:
    """Horizontal bars of Optuna's hyperparameter importances for ``target``, the largest on top."""
    figure = _figure()
    axes = figure.subplots()
    ranked = sorted(importances.items(), key=lambda item: item[1])
    axes.barh([short(name, 24) for name, _ in ranked], [value for _, value in ranked], color="tab:blue")
    for y, (_, value) in enumerate(ranked):
        axes.annotate(f"{value:.2f}", (value, y), xytext=(3, 0), textcoords="offset points", va="center")
    axes.set_xlim(0, max(1.0, max(v for _, v in ranked) * 1.15))
    axes.set_title(f"Hyperparameter importance for {target}")
    axes.set_xlabel("importance (Optuna, normalised to sum to 1)")
    axes.grid(axis="x", alpha=0.3)
    return figure


def objective_names(rows: Sequence[LeaderboardRow]) -> list[str]:
    """The named objectives of a multi-objective leaderboard (empty for a single objective)."""
    return next((list(r.objectives) for r in rows if len(r.objectives) >= 2), [])


def pareto_front(rows: Sequence[LeaderboardRow]) -> Figure:
    """The trials on the first two objectives, the Pareto front (``LeaderboardRow.pareto``) highlighted and
    connected, the baseline marked. Rows without both objectives are left out."""
    x_name, y_name = objective_names(rows)[:2]
    points = [r for r in rows if not is_baseline(r) and x_name in r.objectives and y_name in r.objectives]
    front = sorted((r for r in points if r.pareto), key=lambda r: r.objectives[x_name])
    rest = [r for r in points if not r.pareto]
    figure = _figure()
    axes = figure.subplots()
    axes.scatter(
        [r.objectives[x_name] for r in rest],
        [r.objectives[y_name] for r in rest],
        color="0.6",
        label=f"dominated trials ({len(rest)})",
        zorder=2,
    )
    axes.plot(
        [r.objectives[x_name] for r in front],
        [r.objectives[y_name] for r in front],
        color="tab:red",
        marker="o",
        markersize=8,
        label=f"Pareto front ({len(front)})",
        zorder=3,
    )
    for r in front:
        axes.annotate(
            short(r.trial),
            (r.objectives[x_name], r.objectives[y_name]),
            xytext=(5, 5),
            textcoords="offset points",
            fontsize="small",
        )
    baseline = next((r for r in rows if r.trial == BASELINE_ID), None)
    if baseline is not None and x_name in baseline.objectives and y_name in baseline.objectives:
        axes.scatter(
            [baseline.objectives[x_name]],
            [baseline.objectives[y_name]],
            marker="*",
            s=200,
            color=BASELINE_COLOR,
            label="baseline (base model)",
            zorder=4,
        )
    axes.set_title(f"Pareto front: {x_name} vs {y_name}")
    axes.set_xlabel(f"{x_name} (higher is better)")
    axes.set_ylabel(f"{y_name} (higher is better)")
    axes.grid(alpha=0.3)
    axes.legend(fontsize="small")
    return figure


def study_bars(summary: Sequence[Mapping], columns: Sequence[str]) -> Figure:
    """A recipe study's table as bars: one panel per column (its own scale), one bar per row at
    its mean over seeds, the sample standard deviation as an error bar.

    ``summary`` is ``study.json``'s list: ``{"row": name, "columns": {column: {"mean", "std", "n"}}}``.
    """
    import math

    per_row = 4
    grid_columns = min(per_row, len(columns))
    grid_rows = math.ceil(len(columns) / grid_columns)
    figure = Figure(figsize=(3.2 * grid_columns, 2.8 * grid_rows + 0.8), layout="constrained")
    axes = figure.subplots(grid_rows, grid_columns, squeeze=False).ravel()
    colors = [f"C{i % 10}" for i in range(len(summary))]
    for ax, column in zip(axes, columns):
        cells = [row["columns"].get(column) for row in summary]
        means = [c["mean"] if c else math.nan for c in cells]
        errors = [c["std"] if c else 0.0 for c in cells]
        ax.bar(range(len(summary)), means, yerr=errors, color=colors, capsize=3)
        ax.set_title(short(column, 32), fontsize=9)
        ax.set_xticks([])
        finite = [m for m in means if math.isfinite(m)]
        if finite:  # zoom on the differences: the bars start near the smallest mean
            low, high = min(finite), max(finite)
            pad = max(high - low, 1e-3) * 0.6
            ax.set_ylim(low - pad, high + pad)
    for ax in axes[len(columns) :]:
        ax.set_visible(False)
    handles = [Patch(color=color) for color in colors]
    figure.legend(handles, [row["row"] for row in summary], loc="outside lower center", ncols=min(4, len(summary)))
    return figure
