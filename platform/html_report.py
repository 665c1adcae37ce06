"""A finished search's report for a person: plots in ``RUN_DIR/plots/`` and one self-contained
``RUN_DIR/report.html``.

``write_reports`` reads the run directory alone (``leaderboard.json``, ``search.json``, each trial's
``tune/**/result.json`` or ``progress.csv``, ``optuna.journal``), so the search calls it at its end
and ``python -m platform.report RUN_DIR`` writes it again for any finished run, including one
copied off the cluster. The page loads nothing: the PNGs are embedded as data URIs, the CSS is
inline, and its Content-Security-Policy forbids any other source. A small inline script records
script errors (``data-errors`` on ``<html>``) and whether every image decoded (``data-images`` on
``<body>``), so a headless browser's DOM shows a broken page (the tests open it in Chromium).
"""

from __future__ import annotations

import base64
import json
import math
import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from html import escape
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from evaluators.noise import Gain
from evaluators.scores import part
from platform import plots
from platform.report import BASELINE_ID, Row, is_baseline, score_with_error, winner
from platform.runner import STUDY_FILE

REPORT_FILE = "report.html"
PLOTS_DIR = "plots"


class ReportError(ValueError):
    """A run directory no report can be written from; the message says what is wrong and how to fix it."""


class PlotSkipped(Exception):
    """A plot this run has no data for; the message says why."""


@dataclass(frozen=True)
class Run:
    """What the report shows, as read from a run directory."""

    path: Path
    summary: dict  # search.json
    name: str  # the search's (and its Optuna study's) name
    rows: list[Row]  # ranked, as leaderboard.json has them
    objectives: dict[str, dict[str, float]]  # name -> task weights; a single objective is called "objective"
    tasks: list[str]  # the leaderboard's task columns
    searched: list[str]  # the hyperparameters the search varied
    histories: dict[str, pd.DataFrame]  # trial id -> its evaluation rounds (see trial_histories)

    @property
    def spec(self) -> dict:
        return self.summary["resolved_spec"]

    @property
    def start(self) -> float | None:
        """Unix time the first trial started (the baseline, scored before it, carries no timestamp)."""
        return min((float(f["started"].min()) for f in self.histories.values()), default=None)


@dataclass(frozen=True)
class Plot:
    """One figure of the report: written to ``path``, or skipped for ``reason``."""

    title: str
    path: Path | None
    reason: str | None = None


def read_run(run_dir: Path) -> Run:
    """The run directory's records, or ReportError naming what is missing."""
    if not run_dir.is_dir():
        raise ReportError(
            f"run directory {run_dir} does not exist; name the directory a search wrote (runs/<spec name>)"
        )
    for record in ("search.json", "leaderboard.json"):
        if not (run_dir / record).is_file():
            raise ReportError(
                f"{run_dir} holds no {record}: not a finished doctune search (a search writes its leaderboard "
                "when it ends; an interrupted one continues with python -m platform.search SPEC --resume)"
            )
    try:
        rows = [Row(**record) for record in json.loads((run_dir / "leaderboard.json").read_text())]
        summary = json.loads((run_dir / "search.json").read_text())
        spec = summary["resolved_spec"]
        objective = spec["search"]["objective"]
        objectives = objective.get("objectives") or {"objective": objective["tasks"]}
        # the objectives' tasks, the report-only ones, then any other task a row was scored on
        named = [t for weights in objectives.values() for t in weights] + spec["evaluation"].get("report_tasks", [])
        tasks = list(dict.fromkeys(named + [t for row in rows for t in row.scores]))
        name, searched = str(spec["name"]), list(spec["search"]["space"])
    except (KeyError, TypeError, ValueError) as err:
        raise ReportError(
            f"{run_dir}: leaderboard.json or search.json is not one this doctune wrote ({type(err).__name__}: {err})"
        ) from None
    # the search's own experiment; a confirmation's (tune/<name>-confirm) re-runs the winner and is no trial
    return Run(run_dir, summary, name, rows, objectives, tasks, searched, trial_histories(run_dir / "tune" / name))


def trial_histories(tune_dir: Path) -> dict[str, pd.DataFrame]:
    """Each trial's evaluation rounds, from Tune's per-trial logs under ``tune_dir``.

    A frame per trial id with columns ``timestamp`` (Unix seconds of the report), ``objective`` and
    ``started`` (the trial's start, ``timestamp - time_total_s``), in time order. ``result.json``
    (JSON lines) is read where present, else ``progress.csv``; rounds without an objective are
    dropped, and so are trials left with none.
    """
    frames: dict[str, list[pd.DataFrame]] = {}
    trial_dirs = {p.parent for pattern in ("result.json", "progress.csv") for p in tune_dir.glob(f"**/{pattern}")}
    for trial_dir in sorted(trial_dirs):
        frame = _read_trial_log(trial_dir)
        if frame is None or "objective" not in frame or "timestamp" not in frame:
            continue
        frame = frame.dropna(subset=["objective", "timestamp"])
        if frame.empty:
            continue
        trial = str(frame["trial_id"].iloc[-1]) if "trial_id" in frame else trial_dir.name
        total = frame["time_total_s"].fillna(0) if "time_total_s" in frame else 0.0
        frames.setdefault(trial, []).append(
            pd.DataFrame(
                {
                    "timestamp": frame["timestamp"].astype(float),
                    "objective": frame["objective"].astype(float),
                    "started": frame["timestamp"].astype(float) - total,
                }
            )
        )
    return {
        trial: pd.concat(parts).sort_values("timestamp", kind="stable").reset_index(drop=True)
        for trial, parts in frames.items()
    }


def _read_trial_log(trial_dir: Path) -> pd.DataFrame | None:
    result = trial_dir / "result.json"
    if result.is_file():
        records = []
        for line in result.read_text().splitlines():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:  # a search killed mid-write leaves a partial last line
                continue
        return pd.DataFrame.from_records(records) if records else None
    try:
        return pd.read_csv(trial_dir / "progress.csv")
    except (pd.errors.EmptyDataError, pd.errors.ParserError):
        return None


def param_importances(journal: Path, study_name: str) -> dict[str, float]:
    """Optuna's importance of each searched hyperparameter for the (first) objective, read from the
    study the search kept in ``journal``; PlotSkipped where there is too little to judge from."""
    if not journal.is_file():
        raise PlotSkipped(f"the run directory holds no {journal.name} (no Optuna study was kept)")
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend
    from optuna.trial import TrialState

    try:
        study = optuna.load_study(study_name=study_name, storage=JournalStorage(JournalFileBackend(str(journal))))
    except KeyError:
        raise PlotSkipped(f"{journal.name} holds no study named {study_name!r}") from None
    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    if len(complete) < 2:
        raise PlotSkipped(f"the Optuna study has {len(complete)} completed trial(s); importance needs at least 2")
    names = {name for trial in complete for name in trial.params}
    if not any(len({trial.params.get(name) for trial in complete}) > 1 for name in names):
        raise PlotSkipped("no hyperparameter took more than one value in the completed trials")
    if len(study.directions) == 1:
        importances = optuna.importance.get_param_importances(study)
    else:
        # several objectives need a target: the first, which ranks. Optuna's default evaluator
        # (PED-ANOVA) then reads low values as good, so a maximised objective is negated.
        sign = -1.0 if study.directions[0] == optuna.study.StudyDirection.MAXIMIZE else 1.0
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="PedAnovaImportanceEvaluator computes the importances")
            importances = optuna.importance.get_param_importances(study, target=lambda t: sign * t.values[0])
    return {name: float(value) for name, value in importances.items()}


def write_reports(run_dir: Path) -> list[Path]:
    """Write ``run_dir/plots/*.png`` and ``run_dir/report.html``; the paths written.

    A plot without data (no Optuna journal, a single objective, ...) is left out, and the page
    says why; ReportError for a run directory without a finished search.
    """
    run = read_run(Path(run_dir))
    directory = run.path / PLOTS_DIR
    directory.mkdir(exist_ok=True)
    figures: dict[str, tuple[str, Callable[[], Figure]]] = {
        "objective_over_time": ("Objective over time", lambda: _timeline(run)),
        "task_scores": ("Main score per task", lambda: _task_bars(run)),
        "param_importance": (
            "Hyperparameter importance",
            lambda: plots.param_importance(param_importances(run.path / STUDY_FILE, run.name), _ranking_objective(run)),
        ),
    }
    if plots.objective_names(run.rows):
        figures["pareto_front"] = ("Pareto front", lambda: plots.pareto_front(run.rows))
    drawn = [_draw(directory / f"{stem}.png", title, build) for stem, (title, build) in figures.items()]
    for plot in drawn:
        if plot.reason:
            print(f"doctune: report: {plot.title.lower()} not plotted: {plot.reason}")
    target = run.path / REPORT_FILE
    _write_atomic(target, render(run, drawn, datetime.now(timezone.utc)))
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


# --- the page ---------------------------------------------------------------------------------

CSS = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 1280px; padding: 0 1rem; color: #222; }
h1 { margin-bottom: 0.2rem; } h2 { margin-top: 2rem; border-bottom: 1px solid #ddd; }
.meta { color: #555; margin-top: 0; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: 0.2rem 1rem; }
dt { font-weight: 600; } dd { margin: 0; }
.table { overflow-x: auto; }
table { border-collapse: collapse; font-size: 0.9rem; }
th, td { border-bottom: 1px solid #e4e4e4; padding: 0.3rem 0.6rem; text-align: left; vertical-align: top; }
th { background: #f4f4f4; position: sticky; top: 0; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.status { max-width: 22rem; }
tr.baseline td { background: #fff6d6; font-style: italic; }
tr.winner td { background: #e8f5e9; }
.badge { display: inline-block; font-size: 0.75rem; font-style: normal; padding: 0 0.4rem; border-radius: 0.6rem;
  background: #8a6d00; color: white; margin-left: 0.3rem; white-space: nowrap; }
figure { margin: 1.5rem 0; } figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
.skipped { color: #8a4b00; }
pre { background: #f7f7f7; padding: 0.8rem; overflow-x: auto; font-size: 0.8rem; }
code { background: #f2f2f2; padding: 0 0.2rem; }
"""

# Records script errors and undecodable images as attributes a headless browser's DOM dump shows.
SELF_CHECK = """
window.addEventListener("error", function (event) {
  var root = document.documentElement;
  root.dataset.errors = (root.dataset.errors || "") + (event.message || "a resource failed to load") + "\\n";
}, true);
window.addEventListener("load", function () {
  var images = Array.prototype.slice.call(document.images);
  document.body.dataset.imageCount = String(images.length);
  document.body.dataset.images = images.every(function (img) {
    return img.complete && img.naturalWidth > 0;
  }) ? "ok" : "broken";
});
"""

# Nothing but the page itself: inline style and script, images from data URIs.
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'unsafe-inline'"


def _number(value: object, digits: int = 4) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "–" if value is None else escape(str(value))
    return "–" if math.isnan(value) else f"{value:.{digits}f}"


def _hyperparameter(value: object) -> str:
    return escape(f"{value:.4g}" if isinstance(value, float) else str(value))


def _utc(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def render(run: Run, drawn: list[Plot], now: datetime) -> str:
    """The report page (every piece of run data escaped; images inlined from ``drawn``)."""
    title = f"doctune search {run.name}"
    body = [
        f"<h1>{escape(title)}</h1>",
        f'<p class="meta">{_when(run)} · report written {escape(now.strftime("%Y-%m-%d %H:%M UTC"))}</p>',
        "<h2>Search</h2>",
        _search_section(run),
        "<h2>Winner</h2>",
        _winner_section(run),
        "<h2>Leaderboard</h2>",
        _leaderboard(run),
        "<h2>Plots</h2>",
        *(_figure(plot) for plot in drawn),
        "<h2>Resolved spec</h2>",
        "<details><summary>search.json: the spec as the search ran it</summary>",
        f"<pre>{escape(json.dumps(run.spec, indent=2))}</pre></details>",
    ]
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en">',
            "<head>",
            '<meta charset="utf-8">',
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{escape(title)}</title>",
            f"<style>{CSS}</style>",
            f"<script>{SELF_CHECK}</script>",
            "</head>",
            "<body>",
            *body,
            "</body>",
            "</html>",
        ]
    )


def _when(run: Run) -> str:
    ends = [float(f["timestamp"].max()) for f in run.histories.values()]
    if run.start is None or not ends:
        return f"run directory {escape(str(run.path.resolve()))}"
    minutes = (max(ends) - run.start) / 60
    return f"trials ran from {_utc(run.start)} for {minutes:.1f} min · run directory {escape(str(run.path.resolve()))}"


def _search_section(run: Run) -> str:
    spec = run.spec
    objectives = "; ".join(
        f"<b>{escape(name)}</b> = weighted mean of "
        + ", ".join(f"{escape(task)} × {weight:g}" for task, weight in weights.items())
        for name, weights in run.objectives.items()
    )
    space = ", ".join(
        f"{escape(name)}: {escape(str(d.get('kind', '')))} {escape(json.dumps(d.get('values')))}"
        for name, d in spec["search"]["space"].items()
    )
    plan = run.summary.get("trial_plan", {})
    items = {
        "spec": escape(str(run.summary.get("spec", "?"))),
        "profile": escape(str(run.summary.get("profile", "?"))),
        "base model": escape(str(spec.get("base_model", "?"))),
        "corpus": escape(str(spec.get("corpus", {}).get("source", "?"))),
        "recipe": escape(str(spec.get("recipe", "?"))),
        "objective" + ("s" if len(run.objectives) > 1 else ""): objectives,
        "searched": space or "nothing (fixed hyperparameters only)",
        "trials": escape(
            f"{sum(not is_baseline(r) for r in run.rows)} run"
            + (f" of {plan['trials']} planned, {plan['steps']} steps each" if "trials" in plan else "")
        ),
    }
    return "<dl>" + "".join(f"<dt>{key}</dt><dd>{value}</dd>" for key, value in items.items()) + "</dl>"


def _winner_section(run: Run) -> str:
    best = winner(run.rows)
    if best is None:
        return "<p>No trial produced a score: there is no winner and nothing was exported.</p>"
    text = (
        f"<p>Trial <b>{escape(best.trial)}</b>, chosen by its validation objective {_number(best.objective)}; "
        f"its test objective is {_number(best.test_objective)}"
    )
    if len(run.objectives) > 1:
        text += f" (the first objective, {escape(next(iter(run.objectives)))}, ranks the leaderboard)"
    text += ".</p>"
    if best.gains:
        items = "".join(
            f"<li>over <b>{escape(against)}</b>: {escape(Gain.from_record(gain).describe())}</li>"
            for against, gain in best.gains.items()
        )
        text += f"<p>Test-objective gain, paired bootstrap over the same test items:</p><ul>{items}</ul>"
    if best.confirmation:
        stats = best.confirmation["test_objective"]
        text += (
            f"<p>Its configuration trained with {stats['n']} training seeds: test objective "
            f"{_number(stats['mean'])} ± {_number(stats['std'])} (mean ± sample std).</p>"
        )
    best_dir = run.path / "best"
    try:
        exported = json.loads((best_dir / "doctune.json").read_text()).get("trial_id")
    except (OSError, ValueError):
        exported = None
    if exported == best.trial:
        where = escape(str(best_dir.resolve()))
        return (
            text + f"<p>Exported to <code>{where}</code>: <code>AutoModel.from_pretrained(&quot;{where}&quot;)</code> "
            'loads it; its model card is <a href="best/README.md">best/README.md</a>.</p>'
        )
    held = f"holds trial {escape(str(exported))}" if exported else "does not exist"
    return text + (
        f"<p>Not exported here: <code>best/</code> {held}. Export it with "
        f"<code>python -m platform.export {escape(str(run.path))} --trial {escape(best.trial)} --to DIR</code>.</p>"
    )


def _leaderboard(run: Run) -> str:
    multi = len(run.objectives) > 1
    objective_names = list(run.objectives) if multi else ["objective"]
    best = winner(run.rows)
    header = [
        "rank",
        "trial",
        *(f"{n} (val)" for n in objective_names),
        "test objective",
        *(f"{t} (test)" for t in run.tasks),
        "status",
        *(["Pareto"] if multi else []),
        *run.searched,
    ]
    lines = ["<thead><tr>" + "".join(f"<th>{escape(h)}</th>" for h in header) + "</tr></thead><tbody>"]
    for rank, row in enumerate(run.rows, start=1):
        base = is_baseline(row)
        css = "baseline" if base else "winner" if row is best else ""
        trial = escape(row.trial) + ('<span class="badge">base model</span>' if base else "")
        objectives = [row.objectives.get(n) for n in objective_names] if multi else [row.objective]
        cells = [
            f'<td class="num">{rank}</td>',
            f"<td>{trial}</td>",
            *(f'<td class="num">{_number(v)}</td>' for v in objectives),
            f'<td class="num">{_number(row.test_objective)}</td>',
            *(f'<td class="num">{score_with_error(part(row.scores, t, "test"))}</td>' for t in run.tasks),
            f'<td class="status">{escape(row.status)}</td>',
            *([f'<td title="on the Pareto front">{"◆" if row.pareto else ""}</td>'] if multi else []),
            *(
                f'<td class="num">{_hyperparameter(row.hyperparameters[n]) if n in row.hyperparameters else "–"}</td>'
                for n in run.searched
            ),
        ]
        lines.append(f'<tr class="{css}">' + "".join(cells) + "</tr>")
    note = (
        "<p>Rows are ranked, and each trial's checkpoint chosen, by the objective on the tasks' validation parts; "
        "the test objective and the task scores (main score ± standard error) are on the test parts, which "
        "steered nothing. The highlighted row is the winner, the "
        '<span class="badge">base model</span> rows the base encoder as given and, where the spec converts it, '
        "after the conversion, untrained, on the same tasks"
        + (", ◆ marks the Pareto front of the trials" if multi else "")
        + ".</p>"
    )
    return note + '<div class="table"><table>' + "".join(lines) + "</tbody></table></div>"


def _figure(plot: Plot) -> str:
    if plot.path is None:
        return f'<p class="skipped"><b>{escape(plot.title)}</b>: not plotted, {escape(plot.reason or "")}.</p>'
    data = base64.b64encode(plot.path.read_bytes()).decode("ascii")
    source = f"{PLOTS_DIR}/{plot.path.name}"
    return (
        f'<figure><img src="data:image/png;base64,{data}" alt="{escape(plot.title)}">'
        f"<figcaption>{escape(plot.title)} (<code>{escape(source)}</code>)</figcaption></figure>"
    )


def _write_atomic(path: Path, text: str) -> None:
    partial = path.with_name(path.name + ".partial")  # a reader never sees half a page
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)
