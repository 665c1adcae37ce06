"""The report page: one self-contained HTML file (inline CSS, images as data URIs, a
Content-Security-Policy that forbids any other source), every piece of run data escaped."""

from __future__ import annotations

import base64
import json
import math
from datetime import UTC, datetime
from html import escape

from doctune_core.noise import TaskGain
from doctune_core.run_layout import BEST_DIR, PLOTS_DIR, SEARCH_RECORD
from evaluators.leaderboard import describe_lineage, is_baseline, is_reference
from evaluators.lengths import bucket_title
from evaluators.references import winner
from evaluators.scores import part
from platform.report.run import Plot, Run
from platform.results.ranking import RankingNoise, verdict
from platform.results.text import coverage_lines, describe_confirmation, score_with_error

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
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%d %H:%M UTC")


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
        "<h2>Is the ranking beyond noise?</h2>",
        _noise_section(run),
        "<h2>Leaderboard</h2>",
        _leaderboard(run),
        "<h2>Plots</h2>",
        *(_figure(plot) for plot in drawn),
        "<h2>Resolved spec</h2>",
        f"<details><summary>{SEARCH_RECORD}: the spec as the search ran it</summary>",
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
        return f"run {escape(run.location)}"
    minutes = (max(ends) - run.start) / 60
    return f"trials ran from {_utc(run.start)} for {minutes:.1f} min · run {escape(run.location)}"


def _search_section(run: Run) -> str:
    spec = run.spec
    objectives = "; ".join(
        f"<b>{escape(name)}</b> = weighted mean of "
        + ", ".join(f"{escape(task)} × {weight:g}" for task, weight in weights.items())
        for name, weights in run.objectives.items()
    )
    searched = spec["search"]["space"]
    space = ", ".join(
        f"{escape(name)}: {escape(str(d.get('kind', '')))} {escape(json.dumps(d.get('values')))}"
        + "".join(f" when {escape(other)} in {escape(json.dumps(values))}" for other, values in d.get("when") or ())
        for name, d in searched.items()
    )
    recipe = next((f"searched through {name}" for name in ("views", "recipe") if name in searched), None)
    plan = run.summary.get("trial_plan", {})
    items = {
        "spec": escape(str(run.summary.get("spec", "?"))),
        "profile": escape(str(run.summary.get("profile", "?"))) + _replaced(run.summary.get("profile_replaced", [])),
        "base model": escape(str(spec.get("base_model", "?"))),
        "corpus": escape(str(spec.get("corpus", {}).get("source", "?"))),
        "recipe": escape(recipe or str(spec.get("recipe") or "the default recipe")),
        "objective" + ("s" if len(run.objectives) > 1 else ""): objectives,
        "searched": space or "nothing (fixed hyperparameters only)",
        "scored on": "<br>".join(escape(line) for line in coverage_lines(run.rows, run.tasks)) or "–",
        "ran on": escape(_environment(run.summary.get("environment"))),
        "trials": escape(
            f"{sum(not is_baseline(r) for r in run.rows)} run"
            + (f" of {plan['trials']} planned, {plan['steps']} steps each" if "trials" in plan else "")
        ),
    }
    return "<dl>" + "".join(f"<dt>{key}</dt><dd>{value}</dd>" for key, value in items.items()) + "</dl>"


def _environment(env: dict | None) -> str:
    """``search.json``'s environment in one line (``platform.cluster.environment``)."""
    if not env:
        return "not recorded (a run directory from before the environment was kept)"
    gpu = env["gpu"]
    gpus = (
        f"{gpu['count']}x {', '.join(dict.fromkeys(gpu['models']))} (CUDA {gpu['cuda']}, driver {gpu['driver']})"
        if gpu["count"]
        else "no GPU"
    )
    packages = ", ".join(f"{name} {version}" for name, version in env["packages"].items())
    return (
        f"Python {env['python']}, {env['os']}, {env['cpu']['count']} CPUs ({env['cpu']['model']}), {gpus}; "
        f"commit {env['git_commit'] or 'none (not a git checkout)'}; {packages}"
    )


def _replaced(replaced: list[dict]) -> str:
    """What the profile's built-in overrides changed among the values the spec sets itself."""
    if not replaced:
        return ""
    changes = ", ".join(f"{r['key']} {r['spec']!r} → {r['profile']!r}" for r in replaced)
    return f" (replaced values the spec sets: {escape(changes)})"


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
            f"<li>over <b>{escape(against)}</b>: {escape(gain.describe())}</li>" for against, gain in best.gains.items()
        )
        text += f"<p>Test-objective gain, paired over the same test items:</p><ul>{items}</ul>"
    if best.long_task_gains:
        items = "".join(
            f"<li>over <b>{escape(against)}</b>: {escape(gain.describe())}</li>"
            for against, gain in best.long_task_gains.items()
        )
        text += f"<p>Test gain on the long-document tasks pooled (their objective weights):</p><ul>{items}</ul>"
    text += _task_gains(best, run.tasks)
    if best.confirmation:
        text += f"<p>Its configuration {escape(describe_confirmation(best.confirmation))}.</p>"
    export = f"<code>python -m platform.export {escape(run.location)} --trial {escape(best.trial)} --to DIR</code>"
    if run.kept_at:  # records only were fetched: the winner's weights stay in the storage
        return text + f"<p>Export it from the run's copy with {export}.</p>"
    best_dir = run.path / BEST_DIR
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
    return text + f"<p>Not exported here: <code>best/</code> {held}. Export it with {export}.</p>"


def _task_gains(best, tasks: list[str]) -> str:
    """The winner against each baseline and reference row, task by task: test gain and its 95%
    paired interval, in bold where beyond noise; a retrieval task's length buckets beneath."""
    if not best.task_gains:
        return ""
    tasks = [t for t in tasks if any(t in by_task for by_task in best.task_gains.values())]

    def cell(gain: TaskGain | None) -> str:
        if gain is None:
            return "<td>–</td>"
        text = escape(gain.cell())
        return f'<td class="num">{"<b>" + text + "</b>" if gain.beyond_noise else text}</td>'

    header = "<tr><th>over</th>" + "".join(f"<th>{escape(t)}</th>" for t in tasks) + "</tr>"
    body = ""
    for row, by_task in best.task_gains.items():
        body += f"<tr><td>{escape(row)}</td>" + "".join(cell(by_task.get(t)) for t in tasks) + "</tr>"
        labels = dict.fromkeys(
            label for gain in by_task.values() for label in gain.by_stratum if label.startswith("len_")
        )
        for label in labels:
            strata = [by_task[t].by_stratum.get(label) if t in by_task else None for t in tasks]
            counts = ", ".join(f"n {s.n}" for s in strata if s)
            body += (
                f"<tr class='stratum'><td>&nbsp;&nbsp;{escape(bucket_title(label))} tokens ({counts})</td>"
                + "".join(map(cell, strata))
                + "</tr>"
            )
    return (
        "<p>Against what a user already has: the winner's test gain on each task (95% paired interval over the same "
        "test items; bold: beyond noise; s: training-seed noise included, measured by search.confirm_seeds, "
        "elsewhere not included; too few items to decide: a part under the rule of "
        "docs/decisions/gain-intervals.md), and on retrieval tasks per length of the documents to find:</p>"
        f'<div class="table"><table><thead>{header}</thead><tbody>{body}</tbody></table></div>'
    )


ERROR_COLUMNS = ("main_se", "main_se_items", "main_se_draws")


def _noise_section(run: Run) -> str:
    """The ranking's noise (``platform.results.ranking``): each task's standard error, the trials' spread
    against noise, and the verdict in sentences."""
    if run.noise is None:
        return "<p>Not measured for this search (its leaderboard was written without the ranking's noise).</p>"
    noise = RankingNoise.from_record(run.noise)
    best = winner(run.rows)
    reading = best.locked_reading if best else None
    sentences = "".join(f"<li>{escape(line)}</li>" for line in verdict(noise, best.gains if best else None, reading))
    header = "<tr><th>task</th><th>items (val)</th><th>standard error</th><th>of it: items</th><th>draws</th></tr>"
    rows = "".join(
        f"<tr><td>{escape(task)}</td><td class='num'>{_number(values.get('n'), 0)}</td>"
        + "".join(f"<td class='num'>{_number(values.get(key))}</td>" for key in ERROR_COLUMNS)
        + "</tr>"
        for task, values in noise.tasks.items()
    )
    spread = noise.trials
    figures = ""
    if spread is not None:
        figures = (
            f"<dl><dt>trials' spread (val)</dt><dd>{_number(spread.spread)}</dd>"
            f"<dt>spread from noise alone</dt><dd>{_number(spread.noise_spread)}</dd>"
            f"<dt>ratio</dt><dd>{_number(spread.ratio, 2)} (p = {_number(spread.p_value, 3)})</dd>"
            f"<dt>standard error of a difference</dt><dd>{_number(spread.difference_se)}</dd>"
            f"<dt>verdict</dt><dd><b>{'beyond noise' if spread.beyond_noise else 'within noise'}</b></dd></dl>"
        )
    return (
        f"<ul>{sentences}</ul>{figures}"
        f'<div class="table"><table><thead>{header}</thead><tbody>{rows}</tbody></table></div>'
    )


def _leaderboard(run: Run) -> str:
    multi = len(run.objectives) > 1
    objective_names = list(run.objectives) if multi else ["objective"]
    best = winner(run.rows)
    population = any(row.lineage for row in run.rows)
    header = [
        "rank",
        "trial",
        *(f"{n} (val)" for n in objective_names),
        "test objective",
        *(f"{t} (test)" for t in run.tasks),
        "status",
        *(["Pareto"] if multi else []),
        *(["PBT lineage"] if population else []),
        *run.searched,
    ]
    lines = ["<thead><tr>" + "".join(f"<th>{escape(h)}</th>" for h in header) + "</tr></thead><tbody>"]
    for rank, row in enumerate(run.rows, start=1):
        base = is_baseline(row)
        css = "baseline" if base else "winner" if row is best else ""
        badge = "reference" if is_reference(row) else "base model"
        trial = escape(row.trial) + (f'<span class="badge">{badge}</span>' if base else "")
        objectives = [row.objectives.get(n) for n in objective_names] if multi else [row.objective]
        cells = [
            f'<td class="num">{rank}</td>',
            f"<td>{trial}</td>",
            *(f'<td class="num">{_number(v)}</td>' for v in objectives),
            f'<td class="num">{_number(row.test_objective)}</td>',
            *(f'<td class="num">{score_with_error(part(row.scores, t, "test"))}</td>' for t in run.tasks),
            f'<td class="status">{escape(row.status)}</td>',
            *([f'<td title="on the Pareto front">{"◆" if row.pareto else ""}</td>'] if multi else []),
            *([f"<td>{escape(describe_lineage(row.lineage)) or '–'}</td>"] if population else []),
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
        "after the conversion, untrained, on the same tasks, and the "
        '<span class="badge">reference</span> rows what a user already has (BM25 on retrieval tasks, the base '
        "as its users run it, truncated and averaged over windows), on the same items; none of them steered anything"
        + (", ◆ marks the Pareto front of the trials" if multi else "")
        + (
            "; a PBT trial's lineage names each round at which it went on from another trial's checkpoint, and "
            "its hyperparameters are those it ended with"
            if population
            else ""
        )
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
