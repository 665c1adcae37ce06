"""The recipe study end to end at the smoke profile: a vanilla base trained here, every paper's row
trained and scored, one row tuned, the table and its chart written; a second call redoes nothing."""

from __future__ import annotations

import json
import math
import signal
import subprocess
import sys
import time

import pytest

from platform import study
from platform.spec import load_spec
from platform.spec.study_rows import base_row_name
from tests.conftest import FEW_ITEMS, ROOT, spec_variant

pytestmark = pytest.mark.ray  # starts Ray and runs searches


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    directory = tmp_path_factory.mktemp("study")
    # two of the rows (every recipe trains elsewhere in the suite), two seeds so the table's spread
    # is a real sample standard deviation, and one row tuned by a one-trial search
    shipped = load_spec("seed_study", "smoke")[0].study.rows
    rows = {name: shipped[name] for name in ("simcse", "docsplit")}
    # two scoring rounds per fixed run (a learning curve), one per search, on few items: the rounds and
    # the items' sizes are the searches' own tests
    changes = {
        "study.rows": rows,
        "study.seeds": [0, 1],
        "study.tune_best": 1,
        "study.rounds": 2,
        "search.samples": 1,
        "train.eval_every": 4,
        "train.cpus_per_worker": 0.5,  # a row's two seeds fit the machine at once, so they run at once
        "evaluation.limits": {**FEW_ITEMS, "max_train": 200},  # as the spec's smoke profile: the probe's training split
    }
    spec = spec_variant("seed_study", directory, **changes)
    run_dir = directory / "run"
    code = study.main([spec, "--profile", "smoke", "--run-dir", str(run_dir)])
    return spec, run_dir, code


def test_every_row_and_column_is_filled_and_finite(finished):
    spec_path, run_dir, code = finished
    assert code == 0
    spec, _ = load_spec(spec_path, "smoke")
    summary = json.loads((run_dir / "study.json").read_text())
    rows = [row["row"] for row in summary]
    best = rows[len(spec.study.rows) + 1].removesuffix(" (tuned)")
    assert rows == [base_row_name(spec), *spec.study.rows, f"{best} (tuned)"] and best in spec.study.rows
    columns = [f"{task} {metric}" for task, metrics in spec.study.table.items() for metric in metrics]
    for row in summary:
        assert set(row["columns"]) == set(columns), row["row"]
        for cell in row["columns"].values():
            assert math.isfinite(cell["mean"]) and math.isfinite(cell["std"])
            assert cell["n"] == (1 if row["row"] == base_row_name(spec) else 2)
    assert any(cell["std"] > 0 for row in summary[1:] for cell in row["columns"].values())
    table = (run_dir / "study.md").read_text()
    assert all(f"| {name} |" in table for name in rows) and "—" not in table
    assert (run_dir / "study.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    timings = json.loads((run_dir / "timings.json").read_text())  # where the study's time went, per row
    assert set(timings["rows"]) == {"base row", *rows[1:]} and timings["wall_seconds"] >= sum(timings["rows"].values())


def test_the_tuned_row_is_chosen_on_validation_and_the_table_shows_test(finished):
    spec_path, run_dir, _ = finished
    spec, _ = load_spec(spec_path, "smoke")
    weights = spec.search.objective.tasks
    val_means = {}
    for name in spec.study.rows:
        runs = [json.loads(p.read_text())["scores"] for p in sorted(run_dir.glob(f"runs/{name}/seed*/result.json"))]
        objectives = [sum(w * s[t]["val"]["main"] for t, w in weights.items()) / sum(weights.values()) for s in runs]
        val_means[name] = sum(objectives) / len(objectives)
    summary = json.loads((run_dir / "study.json").read_text())
    tuned = summary[-1]["row"].removesuffix(" (tuned)")
    assert tuned == max(val_means, key=val_means.get)
    row = next(r for r in summary if r["row"] == tuned)
    runs = [json.loads(p.read_text())["scores"] for p in sorted(run_dir.glob(f"runs/{tuned}/seed*/result.json"))]
    key = "r8-fewshot macro_f1"
    assert row["columns"][key]["mean"] == pytest.approx(
        sum(s["r8-fewshot"]["test"]["macro_f1"] for s in runs) / len(runs)
    )
    assert "test parts" in (run_dir / "study.md").read_text()


def test_the_rows_differ_from_the_base_and_from_each_other(finished):
    _, run_dir, _ = finished
    summary = json.loads((run_dir / "study.json").read_text())
    # every row's whole table: a few smoke steps may leave a few-shot classifier's predictions (and a
    # discrete score) where the base had them, while the embeddings, and so other columns, moved
    tables = [tuple(cell["mean"] for _, cell in sorted(row["columns"].items())) for row in summary]
    assert len(set(tables)) == len(tables)  # trained rows are not copies of the base or of one another


def test_each_fixed_run_keeps_every_rounds_validation_scores_and_the_table_shows_the_last(finished):
    spec_path, run_dir, _ = finished
    spec, _ = load_spec(spec_path, "smoke")
    for name in spec.study.rows:
        for path in sorted(run_dir.glob(f"runs/{name}/seed*/result.json")):
            result = json.loads(path.read_text())
            assert list(result["rounds"]) == ["2", "4"], path  # study.rounds: 2 of the smoke profile's 4 steps
            last = result["rounds"]["4"]
            for task in spec.search.objective.tasks:  # the table's scores are the last round's, not the best's
                assert result["scores"][task]["val"]["main"] == pytest.approx(last[task]["val"]["main"])
            assert all("test" not in scores for scores in result["rounds"]["2"].values())
        # every round's weights stay (the last may not be a trial's best round, which alone would)
        weights = sorted(p.parent.name for p in run_dir.glob(f"runs/{name}/trials/*/checkpoints/*/model.safetensors"))
        assert weights == ["step_000002", "step_000002", "step_000004", "step_000004"]
    table = (run_dir / "study.md").read_text()
    curves = table[table.index("learning curves") :]
    assert "| step 2 | step 4 |" in curves and all(f"| {name} |" in curves for name in spec.study.rows)


def test_a_second_call_redoes_nothing(finished, capsys):
    spec, run_dir, _ = finished
    results = sorted(run_dir.glob("runs/*/seed*/result.json"))
    before = {path: path.stat().st_mtime_ns for path in results}
    timed = json.loads((run_dir / "timings.json").read_text())
    # the record as a copy kept in git comes back (a final newline added), and as an earlier doctune
    # wrote it, without a setting added since
    marker = run_dir / "study_spec.json"
    recorded = json.loads(marker.read_text())
    del recorded["resolved_spec"]["study"]["rounds"]
    marker.write_text(json.dumps(recorded, indent=2) + "\n")
    assert study.main([spec, "--profile", "smoke", "--run-dir", str(run_dir)]) == 0
    assert {path: path.stat().st_mtime_ns for path in results} == before
    assert "trial(s)" not in capsys.readouterr().out  # no search was started
    # the call that trained the rows keeps its time: this one's is added to it
    timings = json.loads((run_dir / "timings.json").read_text())
    assert timings["calls"] == timed["calls"] + 1 and timings["wall_seconds"] > timed["wall_seconds"]
    assert all(timings["rows"][row] >= seconds for row, seconds in timed["rows"].items())
    assert timed["rows"]["docsplit"] > 10  # a row that trained, not a no-op's reading


def test_another_spec_in_the_same_directory_is_refused(finished, capsys):
    spec, run_dir, _ = finished
    assert study.main([spec, "--profile", "local", "--run-dir", str(run_dir)]) == 2
    assert "another spec, profile or --task" in capsys.readouterr().err


def test_a_tuned_row_whose_search_had_ended_is_read_back_not_searched_again(finished):
    """A call stopped after a tuned row's search ended, while its winner's table scores were being
    taken, leaves the search whole and no result: the next call reads the search back from its Tune
    state and scores it, training nothing again."""
    spec, run_dir, _ = finished
    (tuned,) = run_dir.glob("runs/* (tuned)/seed0")
    result = tuned / "result.json"
    kept = json.loads(result.read_text())
    checkpoints = {path: path.stat().st_mtime_ns for path in tuned.glob("trials/*/checkpoints/step_*/doctune.json")}
    assert checkpoints
    result.unlink()
    assert study.main([spec, "--profile", "smoke", "--run-dir", str(run_dir)]) == 0
    assert json.loads(result.read_text()) == kept
    # the same checkpoints, untouched: the search was not started again
    assert {path: path.stat().st_mtime_ns for path in tuned.glob("trials/*/checkpoints/step_*/doctune.json")} == (
        checkpoints
    )


def test_timings_sum_over_calls_and_read_a_file_from_before_calls_were_counted(tmp_path):
    path = tmp_path / "timings.json"
    path.write_text(json.dumps({"wall_seconds": 100.0, "rows": {"simcse": 60.0, "base row": 5.0}}))
    summed = study.summed_timings(path, 30.0, {"simcse": 0.5, "docsplit": 20.0})
    assert summed == {
        "wall_seconds": 130.0,
        "rows": {"simcse": 60.5, "base row": 5.0, "docsplit": 20.0},
        "calls": 2,
    }
    assert study.summed_timings(tmp_path / "none.json", 3.0, {"simcse": 2.0})["calls"] == 1


def test_a_spec_without_a_study_and_an_unknown_task_are_refused(tmp_path, capsys):
    assert study.main(["smoke", "--run-dir", str(tmp_path / "a")]) == 2
    assert "no study: section" in capsys.readouterr().err
    assert study.main(["seed_study", "--task", "beir:/nonexistent", "--run-dir", str(tmp_path / "b")]) == 2
    assert "--task" in capsys.readouterr().err
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def _default_sigint_handling() -> None:
    """As under a terminal: a shell's background job (a suite started with &) ignores SIGINT, and
    its children would inherit that."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_stops_the_study_and_records_nothing_for_the_interrupted_row(tmp_path):
    """Tune ends a trial 'gracefully' on SIGINT; the study must stop instead, and the interrupted row
    must have no result (it was once recorded as failed and skipped by the next call)."""
    rows = {"simcse": load_spec("seed_study", "smoke")[0].study.rows["simcse"]}
    # long enough that the trial is still training when the signal comes
    changes = {"study.rows": rows, "study.tune_best": 0, "train.steps": 4000, "train.eval_every": 4000}
    spec = spec_variant("seed_study", tmp_path, **changes)
    run_dir = tmp_path / "run"
    log = tmp_path / "study.log"
    command = [sys.executable, "-m", "platform.study", spec, "--profile", "smoke", "--run-dir", str(run_dir)]
    with log.open("w") as out:
        process = subprocess.Popen(
            command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, preexec_fn=_default_sigint_handling
        )
        try:
            deadline = time.monotonic() + 300
            while not list(run_dir.glob("runs/*/tune/*/run_trial_*")):
                assert process.poll() is None, log.read_text()[-3000:]
                assert time.monotonic() < deadline, "no trial started within 300 s"
                time.sleep(0.5)
            time.sleep(2)
            process.send_signal(signal.SIGINT)
            code = process.wait(timeout=180)
        finally:
            if process.poll() is None:
                process.kill()
    assert code == 1, log.read_text()[-6000:]
    assert "study interrupted; the same command continues it" in log.read_text()
    assert not list(run_dir.glob("runs/*/seed*/result.json"))
