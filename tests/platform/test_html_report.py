"""The report of a run directory: every plot a person can read, one self-contained page that a real
browser (headless Chromium) opens with every image decoded and no script error, and run data
escaped.

The run directory is built without a search: a leaderboard written by the report's own writer
(a baseline row, a multi-objective front, an errored trial, a status carrying HTML), a search.json
shaped like a real one, per-trial Tune logs shaped like Ray's (``progress.csv``, and one trial with
only ``result.json``), and a real Optuna study in a journal file, as the search keeps it.
"""

from __future__ import annotations

import copy
import csv
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import matplotlib.image
import numpy as np
import optuna
import pandas as pd
import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend

from doctune_core.outcomes import Outcomes, mean_of_rows
from doctune_core.run_layout import OPTUNA_JOURNAL
from evaluators.leaderboard import BASELINE_ID, LeaderboardRow, write_leaderboard
from evaluators.scores import flatten
from platform.cluster.environment import environment
from platform.report import plots, write_reports
from platform.report.run import PlotSkipped, ReportError, param_importances, read_run
from platform.results import ranking
from tests.conftest import ROOT

NAME = "report_test"
TASKS = ["news-title-retrieval", "r8-fewshot", "length-robustness"]
OBJECTIVES = {"quality": {"news-title-retrieval": 1.0, "r8-fewshot": 1.0}, "robustness": {"length-robustness": 1.0}}
MALICIOUS = "<script>alert(1)</script>"
START = 1_795_316_800  # Unix seconds; the trials run one after another from here
CHROMIUM = Path("/usr/bin/chromium")
# (trial id, lr, temperature, mlm_weight, quality, robustness, on the Pareto front)
TRIALS = [
    ("a1b2c3d4", 2.7e-05, 0.10, 0.2, 0.886, -0.060, True),
    ("e5f60718", 8.4e-05, 0.18, 0.05, 0.882, -0.030, True),
    ("9a0b1c2d", 3.1e-05, 0.05, 0.0, 0.870, -0.020, True),
    ("3e4f5a6b", 6.0e-05, 0.03, 0.1, 0.860, -0.050, False),
    ("7c8d9e0f", 1.2e-05, 0.12, 0.2, 0.850, -0.070, False),
    ("11223344", 9.0e-05, 0.02, 0.05, 0.840, -0.090, False),
]
ERRORED = "deadbeef"
RESULT_JSON_ONLY = "3e4f5a6b"  # a trial whose directory holds result.json but no progress.csv


def _scores(quality: float, robustness: float) -> dict[str, dict]:
    """A checkpoint's scores (``evaluators.scores``): test as given, validation a little apart."""
    test = {
        "news-title-retrieval": {
            "main": quality + 0.05,
            "ndcg_at_10": quality + 0.05,
            "recall_at_100": 1.0,
            **{"documents": 200.0, "documents_total": 1400.0, "queries": 95.0, "queries_total": 95.0},
        },
        "r8-fewshot": {"main": quality - 0.05, "macro_f1": quality - 0.05, "accuracy": 0.9},
        "length-robustness": {"main": robustness, "mean_abs_shift": -robustness},
    }
    return {
        task: {
            "val": {**{k: v + 0.002 for k, v in values.items()}, "main_se": 0.012, "main_se_items": 0.012, "n": 60.0},
            "test": {**values, "main_se": 0.01, "n": 100.0},
            "split": "validation and test",
        }
        for task, values in test.items()
    }


def _spec(objective: dict) -> dict:
    """``resolved_spec`` as search.json has it (runs/docsplit_long/search.json, trimmed)."""
    return {
        "name": NAME,
        "search": {
            "objective": objective,
            "samples": len(TRIALS) + 1,
            "sampler": "tpe",
            "seed": 0,
            "scheduler": {"asha": {"grace_period": 1, "reduction_factor": 2}},
            "space": {
                "views": {"kind": "choice", "values": ["split", "elongation"], "when": []},
                "split_probability": {"kind": "uniform", "values": [0.3, 0.7], "when": [["views", ["split"]]]},
                "temperature": {"kind": "loguniform", "values": [0.02, 0.2]},
                "mlm_weight": {"kind": "choice", "values": [0.0, 0.05, 0.1, 0.2]},
                "lr": {"kind": "loguniform", "values": [1e-05, 0.0001]},
            },
            "max_concurrent": None,
        },
        "base_model": "all-minilm-l6-v2",
        "corpus": {"source": "news-articles", "max_documents": None},
        "recipe": "docsplit",
        "hyperparameters": {"pooling": "mean", "status_note": MALICIOUS},
        "train": {"steps": 40, "eval_every": 20, "batch_size": 8, "max_length": 128, "workers": 2},
        "evaluation": {"evaluators": 1, "max_length": 256, "report_tasks": []},
    }


def _write_trial_log(experiment: Path, index: int, trial: str, rounds: list[dict]) -> None:
    """Ray Tune's per-trial files: progress.csv (or result.json, JSON lines) with its bookkeeping columns."""
    directory = experiment / f"run_trial_{trial}_{index}_lr=0.0000,temperature=0.1000_2026-11-22_03-06-39"
    directory.mkdir(parents=True)
    started = START + index * 120
    records = []
    for i, metrics in enumerate(rounds, start=1):
        timestamp = started + 50 * i
        records.append(
            {
                "step": 20 * i,
                "eval_round": i,
                "loss": 0.15 - 0.01 * i,
                "tokens_per_s": 1100.0,
                **metrics,
                "checkpoint": f"/runs/{NAME}/trials/{trial}/checkpoints/step_{20 * i:06d}",
                "timestamp": timestamp,
                "checkpoint_dir_name": None,
                "done": i == len(rounds),
                "training_iteration": i,
                "trial_id": trial,
                "date": "2026-11-22_03-08-05",
                "time_this_iter_s": 50.0,
                "time_total_s": 50.0 * i,
                "pid": 12949,
                "hostname": "vm",
            }
        )
    if trial == RESULT_JSON_ONLY:
        (directory / "result.json").write_text("".join(json.dumps(r) + "\n" for r in records))
        return
    with (directory / "progress.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(records[0]))
        writer.writeheader()
        writer.writerows(records)


def _round_metrics(scores: dict[str, dict], objectives: dict[str, float]) -> dict:
    """A round's report: ``<part>/<task>/<metric>`` scores, ``objective`` (the first) and ``objective/<name>``."""
    flat = flatten(scores)
    named = {f"objective/{name}": value for name, value in objectives.items()} if len(objectives) > 1 else {}
    return {**flat, "objective": next(iter(objectives.values())), **named}


def _write_study(path: Path, multi: bool, trials: list[tuple]) -> None:
    """A real Optuna study in a journal file, as the search's OptunaSearch keeps it."""
    study = optuna.create_study(
        study_name=NAME,
        storage=JournalStorage(JournalFileBackend(str(path))),
        directions=["maximize", "maximize"] if multi else ["maximize"],
    )
    distributions = {
        "lr": FloatDistribution(1e-5, 1e-4, log=True),
        "temperature": FloatDistribution(0.02, 0.2, log=True),
        "mlm_weight": CategoricalDistribution([0.0, 0.05, 0.1, 0.2]),
    }
    for _, lr, temperature, mlm_weight, quality, robustness, _ in trials:
        study.add_trial(
            optuna.trial.create_trial(
                params={"lr": lr, "temperature": temperature, "mlm_weight": mlm_weight},
                distributions=distributions,
                values=[quality, robustness] if multi else [quality],
            )
        )


def _ranking_noise(rows: list[LeaderboardRow]) -> dict:
    """The ranking's noise as a search measures it (``platform.results.ranking.assess``), on item-level
    outcomes drawn around each row's validation scores (60 items per task)."""
    rng = np.random.default_rng(0)
    items = {task: rng.uniform(-0.1, 0.1, size=60) for task in OBJECTIVES["quality"]}

    def outcomes(row: LeaderboardRow) -> dict[str, Outcomes]:
        return {
            task: Outcomes({}, row.scores[task]["val"]["main"] + shift + rng.normal(0, 0.05, 60), mean_of_rows)
            for task, shift in items.items()
        }

    trials = [r for r in rows if r.objective is not None and r.trial != BASELINE_ID]
    baselines = [r for r in rows if r.trial == BASELINE_ID]
    return ranking.assess(trials, baselines, outcomes, OBJECTIVES["quality"], None).record()


def make_run_dir(root: Path, multi: bool = True, journal: bool = True) -> Path:
    """A finished search's run directory (see the module docstring)."""
    run_dir = root / NAME
    experiment = run_dir / "tune" / NAME
    experiment.mkdir(parents=True)
    objective = {"tasks": {}, "objectives": OBJECTIVES} if multi else {"tasks": OBJECTIVES["quality"]}
    summary = {
        "spec": str(ROOT / "search_spaces" / f"{NAME}.yaml"),
        "profile": "local",
        "run_dir": str(run_dir),
        "resolved_spec": _spec(objective),
        "fixed_hyperparameters": {"lr": 5e-05, "temperature": 0.05, "mlm_weight": 0.1, "pooling": "mean"},
        "searched": {"temperature": {"loguniform": [0.02, 0.2]}, "lr": {"loguniform": [1e-05, 0.0001]}},
        "trial_plan": {"trials": len(TRIALS) + 1, "steps": 40, "eval_rounds": 2, "workers_per_trial": 2},
        "profile_replaced": [{"key": "train.steps", "spec": 2000, "profile": 40}],
        "environment": environment(ROOT),
    }
    (run_dir / "search.json").write_text(json.dumps(summary, indent=2))
    rows = []
    for index, (trial, lr, temperature, mlm_weight, quality, robustness, pareto) in enumerate(TRIALS, start=1):
        objectives = {"quality": quality, "robustness": robustness} if multi else {"objective": quality}
        scores = _scores(quality, robustness)
        status = "completed" if index != 2 else MALICIOUS
        hp = {"lr": lr, "temperature": temperature, "mlm_weight": mlm_weight, "pooling": "mean"}
        checkpoint = f"{run_dir}/trials/{trial}/checkpoints/step_000040"
        rows.append(LeaderboardRow(trial, status, quality, 40, checkpoint, hp, scores, objectives, pareto and multi))
        # the first round a little worse, the second the row's own scores
        early = {
            task: {split: {k: v - 0.01 for k, v in values[split].items()} for split in ("val", "test")}
            for task, values in scores.items()
        }
        early_objectives = {name: value - 0.01 for name, value in objectives.items()}
        _write_trial_log(
            experiment,
            index,
            trial,
            [_round_metrics(early, early_objectives), _round_metrics(scores, objectives)],
        )
    rows.append(LeaderboardRow(ERRORED, "error: CUDA out of memory", None, None, None, {"lr": 1e-4, "pooling": "mean"}))
    baseline = _scores(0.851, -0.080)
    baseline_objectives = {"quality": 0.851, "robustness": -0.080} if multi else {"objective": 0.851}
    rows.append(
        LeaderboardRow(
            BASELINE_ID,
            "base model, untouched",
            0.851,
            0,
            "all-minilm-l6-v2",
            {"pooling": "mean"},
            baseline,
            baseline_objectives,
        )
    )
    write_leaderboard(rows, run_dir, TASKS, _ranking_noise(rows))
    if journal:
        _write_study(run_dir / OPTUNA_JOURNAL, multi, TRIALS)
    winner_dir = run_dir / "best"
    winner_dir.mkdir()
    (winner_dir / "doctune.json").write_text(json.dumps({"trial_id": TRIALS[0][0], "pooling": "mean"}))
    return run_dir


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> tuple[Path, list[Path]]:
    """A multi-objective run directory with an Optuna journal, and what write_reports wrote in it."""
    run_dir = make_run_dir(tmp_path_factory.mktemp("multi"))
    return run_dir, write_reports(run_dir)


def test_every_plot_is_written_as_a_readable_png(report):
    run_dir, written = report
    expected = ["objective_over_time", "task_scores", "param_importance", "pareto_front"]
    assert written == [run_dir / "plots" / f"{name}.png" for name in expected] + [run_dir / "report.html"]
    for path in written[:-1]:
        pixels = matplotlib.image.imread(path)
        # 8 x 5 inches at 120 dpi
        assert pixels.shape[:2] == (plots.SIZE[1] * plots.DPI, plots.SIZE[0] * plots.DPI), path.name
        assert pixels[..., :3].std() > 0.05, f"{path.name} is blank"


def test_the_page_shows_the_search_its_leaderboard_and_the_winner(report):
    run_dir, _ = report
    page = (run_dir / "report.html").read_text()
    for trial, *_ in TRIALS:
        assert trial in page
    assert ERRORED in page and "CUDA out of memory" in page
    assert re.search(r'<tr class="baseline"><td[^>]*>\d+</td><td>baseline<span class="badge">', page)
    assert re.search(rf'<tr class="winner"><td[^>]*>1</td><td>{TRIALS[0][0]}</td>', page)
    assert page.count("◆</td>") == sum(t[-1] for t in TRIALS)  # the Pareto marks
    assert "<th>quality (val)</th><th>robustness (val)</th><th>test objective</th>" in page
    assert f"Exported to <code>{(run_dir / 'best').resolve()}</code>" in page
    assert "profile</dt><dd>local (replaced values the spec sets: train.steps 2000 → 40)" in page
    assert f"doctune search {NAME}" in page
    ran_on = page.split("ran on</dt><dd>", 1)[1].split("</dd>", 1)[0]
    assert ran_on.startswith(f"Python {sys.version.split()[0]}, ") and "torch " in ran_on and "ray 2." in ran_on
    assert "news-title-retrieval: val 200 of 1,400 documents, 95 of 95 queries (a subsample: not comparable" in page
    assert "recipe</dt><dd>searched through views" in page  # not the spec's default recipe
    assert "split_probability: uniform [0.3, 0.7] when views in [&quot;split&quot;]" in page
    # nothing is fetched: every image is a data URI, and no other source is referenced
    assert re.findall(r'<img src="([a-z]+):', page) == ["data"] * 4
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", page)


def test_the_page_says_whether_the_ranking_is_beyond_noise(report):
    run_dir, _ = report
    page = (run_dir / "report.html").read_text()
    noise = json.loads((run_dir / "leaderboard.json").read_text())["noise"]
    section = page.split("Is the ranking beyond noise?", 1)[1].split("<h2>", 1)[0]
    spread = noise["trials"]
    assert spread["encoders"] == len(TRIALS) and spread["spread"] > 0 and spread["noise_spread"] > 0
    assert f"validation objectives spread {spread['spread']:.4f}" in section
    assert f"ratio</dt><dd>{spread['ratio']:.2f}" in section
    verdict = "beyond noise" if spread["beyond_noise"] else "within noise"
    assert f"<dt>verdict</dt><dd><b>{verdict}</b>" in section
    for task in OBJECTIVES["quality"]:
        assert f"<td>{task}</td><td class='num'>60</td>" in section  # items per part, beside its error
    assert "The winner ahead of the next trial on validation" in section


def test_run_data_is_escaped(report):
    run_dir, _ = report
    page = (run_dir / "report.html").read_text()
    assert MALICIOUS not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page  # the status, and the spec's hyperparameters
    assert page.count("<script>") == 1  # the page's own self-check


def test_the_page_opens_in_headless_chromium_with_every_image_decoded(report):
    run_dir, _ = report
    dom = _chromium_dom(run_dir / "report.html")
    body = re.search(r"<body[^>]*>", dom).group(0)
    assert 'data-images="ok"' in body, body
    assert 'data-image-count="4"' in body, body
    root = re.search(r"<html[^>]*>", dom).group(0)
    assert "data-errors" not in root, root  # no script error, no resource that failed to load
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in dom  # shown as text, never run


def test_chromium_sees_a_broken_image(report, tmp_path):
    """The self-check the browser test relies on does report a broken page."""
    run_dir, _ = report
    page = (run_dir / "report.html").read_text()
    broken = tmp_path / "broken.html"
    broken.write_text(page.replace("data:image/png;base64,", "data:image/png;base64,AAAA", 1))
    body = re.search(r"<body[^>]*>", _chromium_dom(broken)).group(0)
    assert 'data-images="broken"' in body, body


def _chromium_dom(page: Path) -> str:
    """The DOM of ``page`` after its load event, as Debian's headless Chromium dumps it."""
    if not CHROMIUM.exists():
        pytest.fail(
            f"{CHROMIUM} is missing: the report test opens report.html in Debian's Chromium; install it with "
            "`apt-get install -y chromium` (scripts/test.sh does this where apt-get is available)"
        )
    profile = tempfile.mkdtemp(prefix="doctune-chromium-")
    try:
        done = subprocess.run(
            [
                str(CHROMIUM),
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                # without these it waits on the network, which tests do not have
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                f"--user-data-dir={profile}",
                "--dump-dom",
                page.resolve().as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_a_single_objective_run_without_a_journal_says_why_importance_is_missing(tmp_path, capsys):
    run_dir = make_run_dir(tmp_path, multi=False, journal=False)
    stale = run_dir / "plots" / "param_importance.png"
    stale.parent.mkdir()
    stale.write_bytes(b"from an earlier report")
    written = write_reports(run_dir)
    assert [p.name for p in written] == ["objective_over_time.png", "task_scores.png", "report.html"]
    assert not stale.exists()  # no figure left from an earlier report
    page = (run_dir / "report.html").read_text()
    reason = "the run directory holds no optuna.journal (no Optuna study was kept)"
    assert f"<b>Hyperparameter importance</b>: not plotted, {reason}." in page
    assert f"hyperparameter importance not plotted: {reason}" in capsys.readouterr().out
    assert "Pareto" not in page  # one objective: no front, no column


@pytest.mark.parametrize(
    ("trials", "message"),
    [
        (TRIALS[:1], r"1 completed trial\(s\); importance needs at least 2"),
        ([TRIALS[0]] * 3, "no hyperparameter took more than one value"),
    ],
    ids=["one-trial", "nothing-varied"],
)
def test_importance_is_skipped_with_a_reason_when_the_study_cannot_judge(tmp_path, trials, message):
    journal = tmp_path / OPTUNA_JOURNAL
    _write_study(journal, multi=False, trials=trials)
    with pytest.raises(PlotSkipped, match=message):
        param_importances(tmp_path, NAME)


def test_importance_of_a_multi_objective_study_is_for_the_first_objective(tmp_path):
    journal = tmp_path / OPTUNA_JOURNAL
    _write_study(journal, multi=True, trials=TRIALS)
    importances = param_importances(tmp_path, NAME)
    assert set(importances) == {"lr", "temperature", "mlm_weight"}
    assert sum(importances.values()) == pytest.approx(1.0)
    with pytest.raises(PlotSkipped, match="holds no Optuna study named 'elsewhere'"):
        param_importances(tmp_path, "elsewhere")


def test_trial_histories_read_progress_csv_and_result_json_in_time_order(report):
    run_dir, _ = report
    run = read_run(run_dir)
    assert set(run.histories) == {t[0] for t in TRIALS}  # the errored trial logged no round
    first = run.histories[TRIALS[0][0]]
    assert list(first["objective"]) == pytest.approx([TRIALS[0][4] - 0.01, TRIALS[0][4]])
    assert first["timestamp"].is_monotonic_increasing
    assert list(run.histories[RESULT_JSON_ONLY]["objective"]) == pytest.approx([0.85, 0.86])
    assert run.start == START + 120  # the first trial's first round, less its time_total_s


def test_the_timeline_names_the_leaders_and_greys_the_rest():
    rows = [
        LeaderboardRow(f"trial{i:02d}", "completed", 0.5 + i / 100, 40, None, {}, {"t": {"test": {"main": 0.5}}})
        for i in range(9)
    ]
    histories = {
        r.trial: pd.DataFrame({"timestamp": [START + 60.0, START + 120.0], "objective": [0.1, 0.2]}) for r in rows
    }
    leaders = [r.trial for r in plots.top_trials(rows)]
    figure = plots.objective_over_time(histories, START, 0.4, leaders)
    labels = [text.get_text() for text in figure.axes[0].get_legend().get_texts()]
    assert labels == [*[f"trial{i:02d}" for i in range(8, 3, -1)], "other trials (4)", "baseline (base model)"]
    assert figure.axes[0].get_xlabel() == "minutes since the first trial started"


def test_long_task_names_and_trial_ids_are_trimmed_on_the_axes():
    long_task = "beir:/data/collections/a-very-long-collection-name"
    rows = [
        LeaderboardRow(
            "run_trial_0123456789abcdef", "completed", 0.9, 40, None, {}, {long_task: {"test": {"main": 0.9}}}
        ),
        LeaderboardRow(BASELINE_ID, "base model, untouched", 0.8, 0, None, {}, {long_task: {"test": {"main": 0.8}}}),
    ]
    figure = plots.task_scores(rows, [long_task])
    ticks = [t.get_text() for t in figure.axes[0].get_xticklabels()]
    assert ticks == [plots.short(long_task, 24)] and len(ticks[0]) == 24
    labels = [t.get_text() for t in figure.axes[0].get_legend().get_texts()]
    assert labels == ["run_trial_0123456… (0.900)", "baseline (0.800)"]


def test_write_reports_refuses_what_is_no_finished_run(tmp_path):
    with pytest.raises(ReportError, match="does not exist"):
        write_reports(tmp_path / "nowhere")
    (tmp_path / "search.json").write_text("{}")
    with pytest.raises(ReportError, match=r"holds no leaderboard\.json"):
        write_reports(tmp_path)
    (tmp_path / "leaderboard.json").write_text("[]")
    with pytest.raises(ReportError, match="not one this doctune wrote"):
        write_reports(tmp_path)


def test_the_command_line_writes_the_report_or_exits_2(tmp_path):
    run_dir = make_run_dir(tmp_path, multi=False)
    command = [sys.executable, "-m", "platform.report"]
    done = subprocess.run([*command, str(run_dir)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert f"doctune: report in {run_dir / 'report.html'} (3 plots in {run_dir / 'plots'})" in done.stdout
    for bad, message in [(tmp_path / "nowhere", "does not exist"), (run_dir / "tune", "holds no search.json")]:
        done = subprocess.run([*command, str(bad)], cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert done.returncode == 2
        assert done.stderr.startswith("doctune: error: ") and message in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1


def test_the_report_of_a_run_kept_at_a_storage_uri_is_written_locally_and_whole(tmp_path):
    """``platform.report URI --to DIR`` fetches the records the report reads, none of the checkpoints,
    reads Tune's logs where they are, and writes DIR only once the report is complete; the storage is
    left as it was; bad input is one message and exit 2, with nothing written."""
    copy = make_run_dir(tmp_path / "bucket")  # a run kept at a storage URI: its records, tune/ and trials/
    weights = copy / "trials" / TRIALS[0][0] / "checkpoints" / "step_000040" / "model.safetensors"
    weights.parent.mkdir(parents=True)
    weights.write_bytes(b"w" * 1000)
    before = sorted(p.relative_to(copy) for p in copy.rglob("*"))
    command = [sys.executable, "-m", "platform.report"]
    out = tmp_path / "reports" / "x"
    done = subprocess.run([*command, copy.as_uri(), "--to", str(out)], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert f"doctune: report in {out / 'report.html'} (4 plots in {out / 'plots'})" in done.stdout
    page = (out / "report.html").read_text()
    local = write_reports(make_run_dir(tmp_path / "local"))[-1].read_text()
    # the same plots as the run directory's own report (the timeline needs Tune's logs, the importance
    # the Optuna journal)
    assert page.count("<img") == local.count("<img") == 4
    assert (out / OPTUNA_JOURNAL).is_file() and not (out / "trials").exists()  # the records, no checkpoint
    # the page names the run where it is kept, and exports from there (no weights were fetched)
    assert f"run {copy.as_uri()}" in page and ".doctune-report-" not in page and "Exported to" not in page
    assert f"python -m platform.export {copy.as_uri()} --trial {TRIALS[0][0]} --to DIR" in page
    empty = tmp_path / "empty"
    empty.mkdir()  # an empty directory named by --to receives the report too
    done = subprocess.run([*command, copy.as_uri(), "--to", str(empty)], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0 and (empty / "report.html").is_file(), done.stderr
    assert sorted(p.relative_to(copy) for p in copy.rglob("*")) == before  # the storage unchanged
    assert not list((tmp_path / "reports").glob(".doctune-report-*"))  # nothing staged is left
    not_finished = tmp_path / "unfinished"
    shutil.copytree(copy, not_finished)
    (not_finished / "leaderboard.json").unlink()
    for args, message in [
        ([copy.as_uri()], "name a new or empty directory for its report with --to DIR"),
        ([copy.as_uri(), "--to", str(out)], f"--to {out} exists and is not an empty directory"),
        ([copy.as_uri(), "--to", str(weights)], "exists and is not an empty directory"),
        ([(tmp_path / "nothing").as_uri(), "--to", str(tmp_path / "n")], "holds no search.json"),
        ([not_finished.as_uri(), "--to", str(tmp_path / "u")], f"{not_finished.as_uri()} holds no leaderboard.json"),
        ([str(copy), "--to", str(tmp_path / "l")], "--to is for a run at a storage URI"),
    ]:
        done = subprocess.run([*command, *args], cwd=ROOT, capture_output=True, text=True)
        assert done.returncode == 2 and done.stderr.startswith("doctune: error: ") and message in done.stderr, args
        assert len(done.stderr.strip().splitlines()) == 1
    assert not any((tmp_path / name).exists() for name in ("n", "u", "l"))


def test_a_leaderboard_without_objectives_is_read_as_one_objective(tmp_path):
    """Run directories written before multi-objective searches have no ``objectives`` or ``pareto``
    (and, as before the ranking's noise was assessed, a leaderboard that is a plain list of rows)."""
    run_dir = make_run_dir(tmp_path, multi=False, journal=False)
    records = json.loads((run_dir / "leaderboard.json").read_text())["rows"]
    old = copy.deepcopy(records)
    for record in old:
        del record["objectives"], record["pareto"]
    (run_dir / "leaderboard.json").write_text(json.dumps(old))
    written = write_reports(run_dir)
    assert [p.name for p in written] == ["objective_over_time.png", "task_scores.png", "report.html"]
    page = (run_dir / "report.html").read_text()
    assert "<th>objective (val)</th>" in page and "Pareto" not in page
    assert "Not measured for this search" in page
