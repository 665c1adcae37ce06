"""The search-efficiency table: built from a search's checkpoints, merged run by run, completed on
any machine by training only what it lacks."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import fields

import numpy as np
import pytest
import yaml

from bench.efficiency import load_table
from bench.efficiency.diagnostics import diagnostics
from bench.efficiency_table import (
    Layout,
    accounted,
    base_stage_seconds,
    build,
    cells_of_run,
    cells_of_table,
    complete,
    errors_of_table,
    fill_spec,
    follow,
    newest_run_dir,
    would_retrain,
)
from doctune_core.data.corpus import CorpusStats
from platform.spec import load_spec, parse_spec, read_raw
from tests.conftest import ROOT
from trainers.base_stage import base_entry

SPEC = ROOT / "bench" / "efficiency_docsplit.yaml"


TASKS = ("news-title-retrieval", "r8-fewshot")


GPU_MACHINE = {  # search.json's environment, as a lent GPU machine wrote it
    "python": "3.12.3",
    "cpu": {"model": "Intel Xeon", "count": 16},
    "gpu": {"count": 1, "models": ["NVIDIA H200"]},
    "git_commit": "65d5de5",
    "packages": {"torch": "2.11.0", "ray": "2.60.0"},
}


def _scores(val: float, test: float, errors: dict[str, float] | None = None) -> dict:
    """A checkpoint's scores.json; with ``errors``, each task's validation standard error and items."""
    scores = {t: {"val": {"main": val}, "test": {"main": test}} for t in TASKS}
    for task, se in (errors or {}).items():
        scores[task]["val"] |= {"main_se": se, "n": 100}
    return scores


def _trial(
    run_dir, trial: str, values: dict, rounds: dict[int, tuple[float, float]], errors: dict[str, float] | None = None
) -> None:
    """A trial's checkpoints as a search writes them: doctune.json and scores.json per round."""
    for round_, (val, test) in rounds.items():
        checkpoint = run_dir / "trials" / trial / "checkpoints" / f"step_{4 * round_:06d}"
        checkpoint.mkdir(parents=True)
        (checkpoint / "doctune.json").write_text(json.dumps({"step": 4 * round_, "hyperparameters": values}))
        (checkpoint / "scores.json").write_text(json.dumps(_scores(val, test, errors)))


def test_a_run_is_merged_into_the_table_and_a_partial_table_is_refused_by_the_replay(tmp_path):
    layout = Layout(load_spec(str(SPEC), "local")[0])
    points = layout.points()
    assert (
        len(points) == 54 and layout.rounds == 3 and layout.weights == {"news-title-retrieval": 1.0, "r8-fewshot": 1.0}
    )
    run_dir, table = tmp_path / "run", tmp_path / "data" / "t.csv"
    _trial(run_dir, "a", layout.values_at(points[0]), {1: (0.5, 0.6), 2: (0.7, 0.4), 3: (0.6, 0.5)})
    _trial(run_dir, "b", layout.values_at(points[7]), {1: (0.2, 0.3)})  # stopped after one round
    (run_dir / "baseline.json").write_text(json.dumps({"baseline": {"scores": _scores(0.45, 0.55)}}))
    build(SPEC, run_dir, table, "local", train=False)
    cells = cells_of_table(layout, table)
    # a run cut short after one round is not in the table: the next build trains it again
    assert cells == {points[0]: {1: (0.5, 0.6), 2: (0.7, 0.4), 3: (0.6, 0.5)}}
    meta = json.loads(table.with_suffix(".json").read_text())
    assert (meta["configurations_trained"], meta["configurations"]) == (1, 54) and len(meta["made_by"]["runs"]) == 1
    # --no-train trains nothing: what it takes from the run directory is merged, not trained by it
    (run,) = meta["made_by"]["runs"]
    assert (run["configurations"], run["merged"], run["wall_seconds"]) == (0, 1, None)
    assert run["command"].endswith("--no-train")
    assert meta["baseline"] == {"val_objective": 0.45, "test_objective": 0.55}  # the untouched base, as scored
    # the same directory merged again adds nothing, and nothing is counted twice
    build(SPEC, run_dir, table, "local", train=False)
    again = json.loads(table.with_suffix(".json").read_text())["made_by"]["runs"][-1]
    assert (again["configurations"], again["merged"]) == (0, 0)
    with pytest.raises(ValueError, match="missing"):  # the replay takes only a complete grid
        load_table(table)
    # a second run elsewhere adds its configurations to what the table has
    other = tmp_path / "other"
    for i, point in enumerate(points):
        if point not in cells:
            _trial(other, f"t{i}", layout.values_at(point), {r: (0.1 * r + 0.001 * i, 0.2) for r in (1, 2, 3)})
    # ... trained on another machine, which scored the untouched base within its own numerics
    (other / "baseline.json").write_text(json.dumps({"baseline": {"scores": _scores(0.4501, 0.5499)}}))
    (other / "search.json").write_text(json.dumps({"spec": str(SPEC), "environment": GPU_MACHINE}))
    build(SPEC, other, table, "local", train=False)
    complete = load_table(table)
    assert len(complete.configs) == 54 and complete.val[0].tolist() == [0.5, 0.7, 0.6]
    meta = json.loads(table.with_suffix(".json").read_text())
    assert [run["merged"] for run in meta["made_by"]["runs"]] == [1, 0, 53]
    assert meta["baseline"] == {"val_objective": 0.45, "test_objective": 0.55}  # kept from the first run
    merged = meta["made_by"]["runs"][-1]  # names the machine that trained what it merged, and the run
    assert merged["trained_on"]["machine"] == "16 CPUs (Intel Xeon), 1 GPU (NVIDIA H200)"
    assert merged["trained_on"]["versions"]["torch"] == "2.11.0" and f"--run-dir {other}" in merged["command"]
    assert "noise" not in meta and diagnostics(complete)["se_over_spread"] is None  # no run recorded its noise
    # a finished run's ranking check (each task's validation standard error, the median over its
    # trials) is recorded with the table, and its objective's standard error set against the spread
    noise = {"news-title-retrieval": {"main_se": 0.02, "n": 185}, "r8-fewshot": {"main_se": 0.03, "n": 401}}
    (other / "leaderboard.json").write_text(json.dumps({"rows": [], "noise": {"part": "val", "tasks": noise}}))
    build(SPEC, other, table, "local", train=False)
    meta, complete = json.loads(table.with_suffix(".json").read_text()), load_table(table)
    # the objective, the mean of two tasks scored on independent items: se sqrt(0.02^2 + 0.03^2) / 2
    assert meta["noise"]["tasks"] == noise and complete.objective_se == pytest.approx(0.0180278, abs=1e-6)
    spread = np.std(complete.val[:, -1], ddof=1)
    assert diagnostics(complete)["se_over_spread"] == pytest.approx(complete.objective_se / spread)
    # a finished run merged without training is merged from where it is: no new run directory, no
    # copy of the spec, and the entry still names where it was trained
    assert not list(tmp_path.glob("other-*")) and not list(tmp_path.glob("*.fill.yaml"))
    assert "trained_on" in meta["made_by"]["runs"][-1]
    # a trial cut short in another run never pushes a complete configuration out of the table
    cut_short = tmp_path / "cut_short"
    _trial(cut_short, "a", layout.values_at(points[0]), {1: (0.9, 0.9)})
    build(SPEC, cut_short, table, "local", train=False)
    assert cells_of_table(layout, table)[points[0]] == {1: (0.5, 0.6), 2: (0.7, 0.4), 3: (0.6, 0.5)}
    assert len(load_table(table).configs) == 54


def test_each_row_keeps_its_standard_errors_and_the_noise_is_measured_on_every_configuration(tmp_path):
    layout = Layout(load_spec(str(SPEC), "local")[0])
    points = layout.points()
    run_dir, table = tmp_path / "run", tmp_path / "data" / "t.csv"
    for i, point in enumerate(points):  # the last round's errors rise with the configuration's index
        rounds = {r: (0.1 * r + 0.001 * i, 0.2) for r in (1, 2, 3)}
        _trial(run_dir, f"t{i}", layout.values_at(point), rounds, {TASKS[0]: 0.01 + 0.001 * i, TASKS[1]: 0.02})
    # the finished run's ranking check measured its chosen trials only: the rows measure every configuration
    other_noise = {t: {"main_se": 0.5, "n": 100} for t in TASKS}
    (run_dir / "leaderboard.json").write_text(json.dumps({"rows": [], "noise": {"part": "val", "tasks": other_noise}}))
    build(SPEC, run_dir, table, "local", train=False)
    header = table.read_text().splitlines()[0].split(",")
    assert header[-2:] == [f"val_se.{t}" for t in TASKS]
    assert errors_of_table(layout, table)[points[3]][3] == {TASKS[0]: pytest.approx(0.013), TASKS[1]: 0.02}
    noise = json.loads(table.with_suffix(".json").read_text())["noise"]
    median = 0.01 + 0.001 * 26.5  # of 0.010 ... 0.063 over the 54 configurations
    assert noise["tasks"] == {
        TASKS[0]: {"main_se": pytest.approx(median), "n": 100},
        TASKS[1]: {"main_se": 0.02, "n": 100},
    }
    assert noise["objective_se"] == pytest.approx(layout.objective_se({TASKS[0]: median, TASKS[1]: 0.02}))
    assert noise["objective_se"] == pytest.approx((median**2 + 0.02**2) ** 0.5 / 2)  # the mean of two tasks
    assert load_table(table).objective_se == pytest.approx(noise["objective_se"])
    # merged again from the table alone (a new machine has no run directory), the errors and noise stay
    again = tmp_path / "copy" / "t.csv"
    again.parent.mkdir()
    again.write_text(table.read_text())
    again.with_suffix(".json").write_text(table.with_suffix(".json").read_text())
    build(SPEC, tmp_path / "nothing", again, "local", train=False)
    assert errors_of_table(layout, again) == errors_of_table(layout, table)
    assert json.loads(again.with_suffix(".json").read_text())["noise"] == noise


def test_a_running_build_merges_each_configuration_as_it_completes(tmp_path):
    """A real process writes two configurations' checkpoints, one after the other: the build records
    the table when the first completes, before the process ends, and again after the second."""
    layout = Layout(load_spec(str(SPEC), "local")[0])
    run_dir = tmp_path / "run"
    first, second = (layout.values_at(p) for p in layout.points()[:2])
    writer = f"""
import json, pathlib, time
for trial, values in (("a", {first!r}), ("b", {second!r})):
    for round_ in (1, 2, 3):
        checkpoint = pathlib.Path({str(run_dir)!r}) / "trials" / trial / "checkpoints" / f"step_{{4 * round_:06d}}"
        checkpoint.mkdir(parents=True)
        (checkpoint / "doctune.json").write_text(json.dumps({{"step": 4 * round_, "hyperparameters": values}}))
        (checkpoint / "scores.json").write_text(json.dumps({_scores(0.5, 0.5)!r}))
    time.sleep(1.5)
"""
    search = subprocess.Popen([sys.executable, "-c", writer])
    seen = []

    def record():
        seen.append((search.poll() is None, len(complete(layout, cells_of_run(layout, run_dir)))))

    assert follow(search, layout, run_dir, record, every=0.2) == 0
    assert seen == [(True, 1), (True, 2)]  # each recorded while the process still ran, once


def test_the_base_stage_time_is_found_for_a_search_stopped_early(tmp_path, monkeypatch):
    """A search stopped with Ctrl-C writes no ``timings.json``: the base it trained is still set
    apart, from the base's own record, and only when that base was finished during the run."""
    monkeypatch.setenv("DOCTUNE_CACHE", str(tmp_path / "cache"))
    settings = load_spec(str(ROOT / "bench" / "efficiency_recipes_large_parts.yaml"), "local")[0].base
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    stats = dict.fromkeys((field.name for field in fields(CorpusStats)), 0)
    (corpus / "manifest.json").write_text(json.dumps({"stats": stats, "row_groups": [], "digest": "d" * 64}))
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "search.json").write_text(json.dumps({"prepared_corpus": str(corpus)}))
    started = time.time() - 1
    base = base_entry(settings, corpus)
    base.mkdir(parents=True)
    (base / "doctune.json").write_text(json.dumps({"wall_seconds": 599.5}))
    assert base_stage_seconds(run_dir, started, settings) == 600
    assert base_stage_seconds(run_dir, time.time() + 1, settings) == 0  # a base from an earlier run
    assert base_stage_seconds(run_dir, started, None) == 0  # a search on a pretrained base
    (run_dir / "timings.json").write_text(json.dumps({"phases": {"base stage": 610.2}}))
    assert base_stage_seconds(run_dir, started, settings) == 610  # the search's own account first


def test_a_run_is_resumed_only_where_it_would_not_train_again_what_the_table_has(tmp_path):
    """A build resumes an interrupted run unless its search would train a configuration the table
    holds from elsewhere (a lent machine's run merged since): then it starts a new run directory."""
    layout = Layout(load_spec(str(SPEC), "local")[0])
    points = layout.points()
    fill = tmp_path / "run.fill.yaml"
    fill.write_text(yaml.safe_dump(fill_spec(read_raw(SPEC), [layout.values_at(p) for p in points[:2]])))
    run_dir = tmp_path / "run"
    _trial(run_dir, "a", layout.values_at(points[0]), {r: (0.5, 0.5) for r in (1, 2, 3)})
    (run_dir / "search.json").write_text(json.dumps({"spec": str(fill)}))
    assert not would_retrain(layout, run_dir, {points[0]})  # its own configuration
    assert not would_retrain(layout, run_dir, {points[0], points[5]})  # not one it searches
    assert would_retrain(layout, run_dir, {points[0], points[1]})  # its second, merged from elsewhere
    grid = tmp_path / "grid"
    grid.mkdir()
    (grid / "search.json").write_text(json.dumps({"spec": str(SPEC)}))  # the whole grid
    assert would_retrain(layout, grid, {points[53]}) and not would_retrain(layout, tmp_path / "none", {points[0]})
    (grid / "search.json").write_text(json.dumps({"spec": str(tmp_path / "elsewhere.yaml")}))
    assert would_retrain(layout, grid, set())  # a run brought from a machine whose spec is not here
    # a build goes on in the newest run directory it made
    assert newest_run_dir(run_dir) == run_dir
    (tmp_path / "run-2").mkdir()
    (tmp_path / "run-3").mkdir()
    assert newest_run_dir(run_dir) == tmp_path / "run-3"


def test_a_resumed_build_counts_only_what_it_trained():
    """The checked-in table's history: 36 configurations merged from an interrupted build, then the
    same run directory resumed, which trained the other 18 (it once recorded all 54 as its own)."""
    layout = Layout(load_spec(str(SPEC), "local")[0])
    points = layout.points()
    scored = {1: (0.5, 0.5), 2: (0.5, 0.5), 3: (0.5, 0.5)}
    before = {point: dict(scored) for point in points[:36]} | {points[36]: {1: (0.5, 0.5)}}  # one cut short
    after = {point: dict(scored) for point in points}
    assert accounted(layout, set(points[:36]), {}, before, after) == (set(points[36:]), set())
    # resumed before anything was merged: the interrupted part is merged, the rest trained
    assert accounted(layout, set(), {}, before, after) == (set(points[36:]), set(points[:36]))


def test_the_missing_configurations_are_searched_exactly(tmp_path):
    layout = Layout(load_spec(str(SPEC), "local")[0])
    missing = [layout.values_at(p) for p in layout.points()[:5]]
    filled = fill_spec(read_raw(SPEC), missing)
    for profile in ("full", "local", "smoke"):
        search = parse_spec(filled, profile).search
        assert (search.sampler, search.samples) == ("random", 5)
        assert [dict(point) for point in search.warm_start] == missing  # each run first, exactly once


@pytest.mark.parametrize("table", sorted((ROOT / "bench" / "data").glob("efficiency_*.csv")), ids=lambda p: p.stem)
def test_the_checked_in_tables_are_well_formed(table):
    """Each search-efficiency table in bench/data (built from bench/<name>.yaml, partly or whole):
    every configuration in it lies on the spec's grid with every round scored, and its JSON says how
    many are trained of how many."""
    layout = Layout(load_spec(str(ROOT / "bench" / f"{table.stem}.yaml"), "local")[0])
    cells = cells_of_table(layout, table)
    meta = json.loads(table.with_suffix(".json").read_text())
    assert meta["configurations"] == len(layout.points()) and meta["configurations_trained"] == len(cells) > 0
    assert all(sorted(rounds) == list(range(1, layout.rounds + 1)) for rounds in cells.values())
    assert all(0 < v <= 1 and 0 < t <= 1 for rounds in cells.values() for v, t in rounds.values())
    runs = meta["made_by"]["runs"]
    assert all(run["command"].startswith("python bench/search_efficiency.py build") for run in runs)
    # every configuration recorded as trained or merged by exactly one run
    assert sum(run["configurations"] + run.get("merged", 0) for run in runs) == meta["configurations_trained"]
    if len(cells) < len(layout.points()):
        with pytest.raises(ValueError, match="missing"):
            load_table(table)  # no comparison from a partial table
    else:
        assert len(load_table(table).configs) == len(layout.points())
