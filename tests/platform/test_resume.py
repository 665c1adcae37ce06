"""Kill the whole search (driver and every process it started) with SIGKILL mid-run; --resume
finishes it with no finished trial rerun and the interrupted one continued from its checkpoint,
and its MLflow record (``tracking:``) continued: one run for the search, one per row, no round twice."""

from __future__ import annotations

import json
import signal
import subprocess
import time

import psutil
import pytest

from tests.conftest import FEW_ITEMS, ROOT, smoke_search_command, spec_variant

pytestmark = pytest.mark.slow  # starts Ray and runs searches


def _kill_tree(pid: int) -> None:
    root = psutil.Process(pid)
    processes = [root, *root.children(recursive=True)]
    for process in processes:
        try:
            process.send_signal(signal.SIGKILL)
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(processes, timeout=30)


def _checkpoints(run_dir) -> dict[str, int]:
    """Each checkpoint and when it was written, read off its record, which every checkpoint keeps (a
    checkpoint directory itself changes when its training state or, once the trial has ended, its
    weights are released: train.keep_checkpoints)."""
    return {
        str(p.relative_to(run_dir)): (p / "doctune.json").stat().st_mtime_ns
        for p in run_dir.glob("trials/*/checkpoints/step_*/")
        if not p.name.endswith(".partial")
    }


def test_sigkill_then_resume_loses_and_reruns_nothing(tmp_path):
    run_dir = tmp_path / "run"
    store = {"tracking_uri": f"sqlite:///{tmp_path}/mlflow.db", "artifact_location": str(tmp_path / "mlartifacts")}
    spec = spec_variant("smoke", tmp_path, **{"evaluation.limits": FEW_ITEMS, "tracking.mlflow": store})
    command = smoke_search_command(spec, run_dir)
    driver = subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    deadline = time.monotonic() + 600
    try:
        # wait until one trial has finished and the second has saved (and had scored) a checkpoint
        while time.monotonic() < deadline:
            scored = sorted(run_dir.glob("trials/*/checkpoints/step_*/scores.json"))
            if len({p.parents[2].name for p in scored}) == 2:
                break
            assert driver.poll() is None, "the search ended before it could be interrupted"
            time.sleep(0.5)
        else:
            raise AssertionError("no second trial started within 10 minutes")
    finally:
        _kill_tree(driver.pid)
    before = _checkpoints(run_dir)
    finished = {p.parents[2].name for p in run_dir.glob("trials/*/checkpoints/step_000004/scores.json")}
    assert finished, "the first trial should have finished before the kill"
    assert not (run_dir / "leaderboard.json").exists()

    done = subprocess.run([*command, "--resume"], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = json.loads((run_dir / "leaderboard.json").read_text())["rows"]
    trials = [r for r in rows if r["trial"] != "baseline"]
    assert len(trials) == 2 and {r["status"] for r in trials} == {"completed"}
    after = _checkpoints(run_dir)
    assert all(after[path] == mtime for path, mtime in before.items()), "a saved checkpoint was rewritten"
    assert len(after) == 4  # 2 trials x 2 rounds: nothing trained twice, nothing missing
    assert "resumed from step_" in done.stdout + done.stderr
    baseline_mtime = (run_dir / "baseline.json").stat().st_mtime_ns
    assert baseline_mtime < min(before.values())  # the baseline was not scored again
    # the Optuna study's history is intact: each trial once, both told their final objective
    import optuna

    from platform.tuner import study_storage

    study = optuna.load_study(study_name="smoke", storage=study_storage(run_dir))
    assert [t.state for t in study.trials] == [optuna.trial.TrialState.COMPLETE] * 2
    params = sorted(t.params["temperature"] for t in study.trials)
    assert params == pytest.approx(sorted(r["hyperparameters"]["temperature"] for r in trials))
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=store["tracking_uri"])
    runs = client.search_runs([client.get_experiment_by_name("smoke").experiment_id])
    parents = [run for run in runs if "mlflow.parentRunId" not in run.data.tags]
    children = {run.info.run_name: run for run in runs if run.data.tags.get("mlflow.parentRunId")}
    assert len(parents) == 1 and len(children) == len(runs) - 1 == 3 and set(children) == {r["trial"] for r in rows}
    for row in trials:
        history = client.get_metric_history(children[row["trial"]].info.run_id, "objective")
        assert [m.step for m in history] == [2, 4]  # both rounds of each trial, the one before the kill not again
