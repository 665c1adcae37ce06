"""Experiment tracking (``platform.tracking``): what a round may show, the MLflow runs written into a
real local store and read back with ``MlflowClient``, a resumed search continuing them, and a server
that does not answer. The whole path inside a search: tests/test_search_smoke.py."""

from __future__ import annotations

import dataclasses
import json
import time

import pytest

from evaluators.leaderboard import LeaderboardRow
from platform.spec import SpecError, load_spec, parse_spec, read_raw
from platform.tracking import Trackers, steering_metrics
from platform.tracking.trackers import wandb_runs
from platform.tracking.trackers.mlflow_runs import MlflowRuns, MlflowTracking, flat_params
from platform.tracking.trackers.wandb_runs import WandbTracking
from tests.conftest import closed_port
from tests.wandb_records import offline_runs

ROUND = {
    "step": 4,
    "eval_round": 2,
    "report_step": 4,
    "loss": 0.8,
    "tokens_per_s": 410.0,
    "objective": 0.81,
    "val/r8-fewshot/main": 0.62,
    "test/r8-fewshot/main": 0.77,
    "test_objective": 0.86,
    "checkpoint": "/runs/x/step_000004",
    "done": False,
    "config": {"lr": 1e-4},
}


def test_a_round_shows_validation_losses_and_speed_never_test():
    assert steering_metrics(ROUND) == {
        "loss": 0.8,
        "tokens_per_s": 410.0,
        "objective": 0.81,
        "val/r8-fewshot/main": 0.62,
    }


def test_nested_settings_become_mlflow_params():
    params = flat_params({"train": {"steps": 4, "seed": None}, "search": {"space": {}}, "tags": ["a"], "name": "x"})
    assert params == {"train.steps": "4", "train.seed": "null", "search.space": "{}", "tags": '["a"]', "name": "x"}
    assert len(flat_params({"long": "y" * 10_000})["long"]) == 6000


def test_the_tracking_section_is_typed_and_a_missing_uri_is_named():
    raw = read_raw(load_spec("smoke", "smoke")[1])
    spec = parse_spec(raw | {"tracking": {"mlflow": {"tracking_uri": "sqlite:///m.db"}}}, "smoke")
    assert spec.tracking == {"mlflow": MlflowTracking(tracking_uri="sqlite:///m.db")}
    assert parse_spec(raw, "smoke").tracking == {}
    assert parse_spec(raw | {"tracking": {"mlflow": None}}, "smoke").tracking == {}  # null: off
    with pytest.raises(SpecError, match=r"tracking\.mlflow\.tracking_uri"):
        parse_spec(raw | {"tracking": {"mlflow": {"experiment": "x"}}}, "smoke")
    with pytest.raises(SpecError, match=r"tracking\.neptune: unknown tracker; known: mlflow, wandb"):
        parse_spec(raw | {"tracking": {"neptune": {"project": "x"}}}, "smoke")


def _row(trial: str, step: int | None, objective: float, test: float) -> LeaderboardRow:
    scores = {"r8-fewshot": {"val": {"main": objective}, "test": {"main": test, "macro_f1": test}}}
    return LeaderboardRow(trial, "completed", objective, step, None, {"lr": 1e-4}, scores, test_objective=test)


@pytest.fixture
def store(tmp_path):
    return MlflowTracking(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db", artifact_location=str(tmp_path / "artifacts"))


def _killed_and_resumed(make_tracker, run_dir, when_killed=lambda: None) -> None:
    """A tracked search killed after three rounds and resumed (a new tracker on the same run
    directory, ``make_tracker()``), whose resumed trial reports its last round again; then its end,
    twice (a finished search run again logs nothing more)."""
    spec = dataclasses.asdict(load_spec("smoke", "smoke")[0])  # as search.json records it
    run_dir.mkdir()
    (run_dir / "leaderboard.json").write_text("{}")
    first = make_tracker()
    first.start(spec, "smoke", run_dir)
    first.round("t1", {"lr": 1e-4}, 2, {"objective": 0.5})
    first.round("t1", {"lr": 1e-4}, 4, {"objective": 0.7})
    first.round("t2", {"lr": 1e-3}, 2, {"objective": 0.4})
    when_killed()
    resumed = make_tracker()
    resumed.start(spec, "smoke", run_dir)
    resumed.round("t1", {"lr": 1e-4}, 4, {"objective": 0.7})
    resumed.round("t2", {"lr": 1e-3}, 4, {"objective": 0.6})
    rows = [_row("baseline", None, 0.3, 0.35), _row("t1", 4, 0.7, 0.75), _row("t2", 4, 0.6, 0.65)]
    resumed.finish(rows, run_dir, None)
    resumed.finish(rows, run_dir, None)


def _down_server_warns_once(tracker, directory, capsys) -> str:
    """A search's calls into ``tracker``, whose server does not answer: within 30 s, and the one warning."""
    spec = dataclasses.asdict(load_spec("smoke", "smoke")[0])  # as search.json records it
    trackers = Trackers([tracker])
    began = time.monotonic()
    trackers.start(spec, "smoke", directory)
    for step in (2, 4):
        trackers.round("t1", {"lr": 1e-4}, ROUND | {"step": step})
    trackers.finish([_row("t1", 4, 0.7, 0.75)], directory, None)
    assert time.monotonic() - began < 30
    warnings = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "goes on" in warnings[0], warnings
    return warnings[0]


def test_trials_nest_under_the_search_and_a_resumed_search_logs_no_round_twice(tmp_path, store):
    from mlflow import MlflowClient

    run_dir = tmp_path / "run"
    _killed_and_resumed(lambda: MlflowRuns(store, "smoke", run_dir), run_dir)

    client = MlflowClient(tracking_uri=store.tracking_uri)
    experiment = client.get_experiment_by_name("smoke").experiment_id
    runs = {r.info.run_name: r for r in client.search_runs([experiment])}
    search = next(r for r in runs.values() if "mlflow.parentRunId" not in r.data.tags)
    assert set(runs) == {search.info.run_name, "baseline", "t1", "t2"}
    assert all(runs[t].data.tags["mlflow.parentRunId"] == search.info.run_id for t in ("baseline", "t1", "t2"))
    assert search.data.params["train.steps"] == "4" and search.data.params["profile"] == "smoke"
    assert runs["t2"].data.params == {"lr": "0.001"}
    history = {
        trial: [(m.step, m.value) for m in client.get_metric_history(run.info.run_id, "objective")]
        for trial, run in runs.items()
    }
    assert history["t1"] == [(2, 0.5), (4, 0.7)] and history["t2"] == [(2, 0.4), (4, 0.6)]
    assert history["baseline"] == [(0, 0.3)]  # never trained: its validation score once
    for trial, value in (("t1", 0.75), ("t2", 0.65)):  # test once, at the chosen round
        tests = client.get_metric_history(runs[trial].info.run_id, "test/r8-fewshot/main")
        assert [(m.step, m.value) for m in tests] == [(4, value)]
        assert runs[trial].data.tags["doctune.chosen_step"] == "4" and runs[trial].info.status == "FINISHED"
    assert search.data.tags["doctune.winner"] == "t1"
    assert [a.path for a in client.list_artifacts(search.info.run_id)] == ["leaderboard.json"]
    assert json.loads((run_dir / "tracking.json").read_text())["mlflow"]["finished"] is True


def test_a_server_that_does_not_answer_warns_once_and_the_search_goes_on(tmp_path, capsys):
    port = closed_port()
    tracker = MlflowRuns(MlflowTracking(tracking_uri=f"http://127.0.0.1:{port}"), "smoke", tmp_path)
    assert f"http://127.0.0.1:{port}" in _down_server_warns_once(tracker, tmp_path, capsys)


def test_wandb_offline_groups_the_trials_with_the_search_and_a_resumed_search_logs_no_round_twice(tmp_path):
    def driver_gone() -> None:  # its runs' files closed, nothing finished in doctune's state
        for run in list(wandb_runs._OPEN.values()):
            run.finish()
        wandb_runs._OPEN.clear()

    run_dir = tmp_path / "run"
    settings = WandbTracking(project="doctune-test", mode="offline")
    _killed_and_resumed(lambda: wandb_runs.WandbRuns(settings, "smoke", run_dir), run_dir, driver_gone)

    runs = offline_runs(run_dir)
    group = f"smoke ({run_dir.name})"
    assert set(runs) == {group, "baseline", "t1", "t2"}
    assert {run["group"] for run in runs.values()} == {group}
    assert runs[group]["job_type"] == "search" and runs["t1"]["job_type"] == "trial"
    assert runs[group]["config"]["train"]["steps"] == 4 and runs[group]["config"]["profile"] == "smoke"
    assert runs["t2"]["config"] == {"lr": 0.001}
    assert runs["t1"]["history"] == [(2, {"objective": 0.5}), (4, {"objective": 0.7})]
    assert runs["t2"]["history"] == [(2, {"objective": 0.4}), (4, {"objective": 0.6})]
    assert runs["baseline"]["history"] == [] and runs["baseline"]["summary"]["objective"] == 0.3
    for trial, value in (("t1", 0.75), ("t2", 0.65)):  # test in the summary, for the chosen round
        summary = runs[trial]["summary"]
        assert summary["test/r8-fewshot/main"] == value and summary["test_objective"] == value
        assert summary["chosen_step"] == 4 and summary["status"] == "completed"
    assert runs[group]["summary"]["winner"] == "t1"
    assert runs[group]["artifacts"] == {f"smoke-{run_dir.name}-search": {"type": "search", "aliases": ["latest"]}}
    assert json.loads((run_dir / "tracking.json").read_text())["wandb"]["finished"] is True


@pytest.mark.slow  # waits out W&B's start-up timeout
def test_a_wandb_server_that_does_not_answer_warns_once_and_the_search_goes_on(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("WANDB_BASE_URL", f"http://127.0.0.1:{closed_port()}")
    monkeypatch.setenv("WANDB_API_KEY", "0" * 40)
    tracker = wandb_runs.WandbRuns(WandbTracking(project="doctune-test"), "smoke", tmp_path)
    assert "W&B tracking (online, project doctune-test)" in _down_server_warns_once(tracker, tmp_path, capsys)


@pytest.mark.parametrize(
    ("tracking", "package"),
    [({"mlflow": {"tracking_uri": "sqlite:///m.db"}}, "mlflow"), ({"wandb": {"project": "p"}}, "wandb")],
)
def test_a_tracker_that_is_not_installed_is_refused_with_how_to_install_it(tracking, package, monkeypatch):
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == package else find_spec(name, *a))
    raw = read_raw(load_spec("smoke", "smoke")[1])
    with pytest.raises(SpecError, match=rf"tracking\.{package}: .* is not installed; pip install"):
        parse_spec(raw | {"tracking": tracking}, "smoke")
    monkeypatch.undo()
    assert package in parse_spec(raw | {"tracking": tracking}, "smoke").tracking


def test_the_round_callback_tune_saved_feeds_the_trackers_of_the_search_that_runs_now(tmp_path, store):
    """Tune saves its callbacks with the experiment and hands a resumed search those back: the
    saved callback feeds the resuming search's trackers, in its own run directory."""
    import cloudpickle
    from ray.tune.experiment import Trial

    spec = dataclasses.asdict(load_spec("smoke", "smoke")[0])
    first_dir, resumed_dir = tmp_path / "first", tmp_path / "moved"
    first_dir.mkdir(), resumed_dir.mkdir()
    first = Trackers([MlflowRuns(store, "smoke", first_dir)])
    first.start(spec, "smoke", first_dir)
    with first.fed({"pooling": "mean"}) as callback:
        saved = cloudpickle.dumps(callback)  # as Tune keeps it in tuner.pkl
    resumed = Trackers([MlflowRuns(store, "smoke", resumed_dir)])
    resumed.start(spec, "smoke", resumed_dir)
    trial = Trial("run_trial", config={"lr": 1e-4}, trial_id="t1", stub=True)
    restored = cloudpickle.loads(saved)
    restored.on_trial_result(0, [trial], trial, ROUND)  # outside a search: nothing fed, nothing written
    with resumed.fed({"pooling": "mean"}):
        restored.on_trial_result(1, [trial], trial, ROUND)
    steps = [json.loads((d / "tracking.json").read_text())["mlflow"]["steps"] for d in (first_dir, resumed_dir)]
    assert steps == [{}, {"t1": 4}]
    with Trackers([]).fed({}) as none:
        assert none is None  # no trackers, no callback


def test_the_search_record_names_the_distribution_that_installed_each_trackers_library():
    from platform.cluster.environment import _tracker_packages, _version

    # the test extra installs MLflow as mlflow-skinny, whose module is mlflow: its version is recorded
    versions = {name: _version(name) for name in _tracker_packages()}
    assert versions["mlflow-skinny"] and versions["wandb"] == "0.31.0", versions
