"""A finished search's report for a person: plots in ``RUN_DIR/plots/`` and one self-contained
``RUN_DIR/report.html``.

``write_reports`` reads the run directory alone (``leaderboard.json``, ``search.json``, each trial's
``tune/**/result.json`` or ``progress.csv``, ``optuna.journal``), so the search calls it at its end
and ``python -m platform.report RUN_DIR`` writes it again for any finished run, including one
copied off the cluster. The page loads nothing: the PNGs are embedded as data URIs, the CSS is
inline, and its Content-Security-Policy forbids any other source. A small inline script records
script errors (``data-errors`` on ``<html>``) and whether every image decoded (``data-images`` on
``<body>``), so a headless browser's DOM shows a broken page (the tests open it in Chromium).

Reading the run is ``platform.report.run``, the page ``platform.report.page``, the figures
``platform.report.plots``; ``python -m platform.report RUN_DIR`` is ``platform.report.__main__``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from matplotlib.figure import Figure

from doctune_core.run_layout import PLOTS_DIR, REPORT_FILE
from evaluators.leaderboard import BASELINE_ID
from platform.report import plots
from platform.report.page import render
from platform.report.run import Plot, PlotSkipped, Run, param_importances, read_run
from platform.rundir.layout import write_atomic

log = logging.getLogger(f"doctune.{__name__}")


def write_reports(run_dir: Path, kept_at: str | None = None) -> list[Path]:
    """Write ``run_dir/plots/*.png`` and ``run_dir/report.html``; the paths written. ``kept_at``:
    the storage URI the run's records were fetched from into ``run_dir`` (the page names it).

    A plot without data (no Optuna journal, a single objective, ...) is left out, and the page
    says why; ReportError for a run directory without a finished search.
    """
    run = read_run(Path(run_dir), kept_at)
    directory = run.path / PLOTS_DIR
    directory.mkdir(exist_ok=True)
    figures: dict[str, tuple[str, Callable[[], Figure]]] = {
        "objective_over_time": ("Objective over time", lambda: _timeline(run)),
        "task_scores": ("Main score per task", lambda: _task_bars(run)),
        "score_by_length": ("Score against document length", lambda: plots.score_by_length(run.rows, run.tasks)),
        "param_importance": (
            "Hyperparameter importance",
            lambda: plots.param_importance(param_importances(run.path, run.name), _ranking_objective(run)),
        ),
    }
    if plots.objective_names(run.rows):
        figures["pareto_front"] = ("Pareto front", lambda: plots.pareto_front(run.rows))
    drawn = [_draw(directory / f"{stem}.png", title, build) for stem, (title, build) in figures.items()]
    for plot in drawn:
        if plot.reason:
            log.info(f"doctune: report: {plot.title.lower()} not plotted: {plot.reason}")
    target = run.path / REPORT_FILE
    write_atomic(target, render(run, drawn, datetime.now(UTC)))
    return [p.path for p in drawn if p.path] + [target]


def _draw(path: Path, title: str, build: Callable[[], Figure]) -> Plot:
    try:
        figure = build()
    except PlotSkipped as why:
        reason = str(why)
    except Exception as err:  # one figure's failure costs that figure, not the report
        reason = f"it failed ({type(err).__name__}: {err})"
    else:
        plots.save_png(figure, path)
        return Plot(title, path)
    path.unlink(missing_ok=True)  # no stale figure from an earlier report of this run
    return Plot(title, None, reason)


def _ranking_objective(run: Run) -> str:
    """How the plots name the objective that ranks: the first of several, by its name."""
    return "objective" if len(run.objectives) == 1 else f"{next(iter(run.objectives))} (the first objective)"


def _timeline(run: Run) -> Figure:
    if not run.histories:
        raise PlotSkipped("no trial logged an evaluation round (no tune/**/result.json or progress.csv)")
    baseline = next((r.objective for r in run.rows if r.trial == BASELINE_ID), None)  # the base as given
    leaders = [r.trial for r in plots.top_trials(run.rows)]
    return plots.objective_over_time(run.histories, run.start, baseline, leaders, _ranking_objective(run))


def _task_bars(run: Run) -> Figure:
    if not plots.top_trials(run.rows):
        raise PlotSkipped("no trial has a score")
    return plots.task_scores(run.rows, run.tasks)
