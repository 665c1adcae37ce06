"""Faults injected for real: a killed Train worker, a diverging trial, run directories that cannot
be written or are full, and corpora a recipe cannot use. Real processes, real kills, real Ray."""

from __future__ import annotations

import copy
import json
import signal
import subprocess
import sys
import time

import psutil
import pytest
import yaml

from platform.spec import find_spec_file, read_raw
from tests.conftest import ROOT


def _smoke_variant(tmp_path, **changes) -> str:
    """The smoke spec with ``changes`` ({"train.steps": 6, ...}), also as its own smoke-profile
    overrides so that the built-in smoke profile does not undo them; returns the file's path."""
    raw = copy.deepcopy(read_raw(find_spec_file("smoke")))
    raw["profiles"] = {"smoke": {}}
    for path, value in changes.items():
        *parents, last = path.split(".")
        for node in (raw, raw["profiles"]["smoke"]):
            for key in parents:
                node = node.setdefault(key, {})
            node[last] = value
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(raw))
    return str(spec)


def _search(*args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "platform.search", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


def _train_workers() -> list[psutil.Process]:
    workers = []
    for process in psutil.process_iter(["cmdline"]):
        if any("RayTrainWorker" in part for part in process.info["cmdline"] or []):
            workers.append(process)
    return workers


def test_a_killed_train_worker_restarts_from_the_last_checkpoint_and_the_trial_finishes(tmp_path):
    spec = _smoke_variant(tmp_path, **{"train.steps": 6, "search.samples": 1})
    run_dir = tmp_path / "run"
    log = (tmp_path / "search.log").open("w")
    search = subprocess.Popen(
        [sys.executable, "-m", "platform.search", spec, "--profile", "smoke", "--run-dir", str(run_dir)],
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 600
        while not list(run_dir.glob("trials/*/checkpoints/step_000002")):
            assert search.poll() is None and time.monotonic() < deadline, "no first checkpoint"
            time.sleep(0.2)
        victim = max(_train_workers(), key=lambda p: p.pid)
        victim.send_signal(signal.SIGKILL)
        assert search.wait(timeout=600) == 0
    finally:
        if search.poll() is None:
            search.kill()
    output = (tmp_path / "search.log").read_text()
    assert not psutil.pid_exists(victim.pid) or victim.status() == psutil.STATUS_ZOMBIE
    assert "resumed from step_00000" in output  # the new worker group started from a checkpoint
    (trial,) = [r for r in json.loads((run_dir / "leaderboard.json").read_text()) if r["trial"] != "baseline"]
    assert trial["status"] == "completed" and trial["step"] in (2, 4, 6)
    steps = sorted(int(p.name[5:]) for p in run_dir.glob(f"trials/{trial['trial']}/checkpoints/step_*"))
    assert steps == [2, 4, 6]
    (result_file,) = run_dir.glob("tune/*/*/result.json")
    reported = [json.loads(line)["step"] for line in result_file.read_text().splitlines() if line.strip()]
    assert reported[-1] == 6 and reported == sorted(reported)  # the step count went on, not back to 0


def test_a_diverging_trial_ends_as_errored_with_the_reason_and_the_search_goes_on(tmp_path):
    import optuna

    from platform.runner import study_storage

    spec = _smoke_variant(tmp_path, **{"train.fault_nan_at_step": 3})
    run_dir = tmp_path / "run"
    done = _search(spec, "--profile", "smoke", "--run-dir", str(run_dir))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = [r for r in json.loads((run_dir / "leaderboard.json").read_text()) if r["trial"] != "baseline"]
    assert len(rows) == 2
    for row in rows:  # round 1 (step 2) was scored before the loss went NaN at step 3
        assert row["status"].startswith("error after round 1") and "loss became nan at step 3" in row["status"]
        assert row["step"] == 2 and row["objective"] is not None
    assert "resumed from" not in done.stdout  # a divergence is not retried as a worker failure
    assert (run_dir / "best" / "doctune.json").exists()  # the search went on to its report and export
    study = optuna.load_study(study_name="smoke", storage=study_storage(run_dir))
    assert len(study.trials) == 2 and all(t.state.is_finished() for t in study.trials)


def test_an_unwritable_run_dir_is_refused_before_anything_starts():
    done = _search("smoke", "--profile", "smoke", "--run-dir", "/proc/doctune-run", timeout=120)
    assert done.returncode == 2 and "cannot write in /proc" in done.stderr
    assert done.stderr.count("doctune: error:") == 1 and "Traceback" not in done.stderr


def test_a_full_disk_is_refused_before_anything_starts(tmp_path):
    small = tmp_path / "small-disk"
    small.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(small)], capture_output=True)
    assert mounted.returncode == 0, f"this test mounts a 1 MiB tmpfs and needs root: {mounted.stderr!r}"
    try:
        done = _search("smoke", "--profile", "smoke", "--run-dir", str(small / "run"), timeout=120)
        assert done.returncode == 2 and "MiB free on its disk" in done.stderr
        assert not (small / "run").exists()
    finally:
        subprocess.run(["umount", str(small)], check=True)


@pytest.mark.parametrize(
    ("recipe", "refused"),
    [("docsplit", True), ("simcse", False)],
)
def test_a_corpus_of_one_sentence_documents_is_refused_for_docsplit_only(tmp_path, recipe, refused):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(
        "".join(json.dumps({"text": f"Short note number {i} about the budget."}) + "\n" for i in range(50))
    )
    spec = _smoke_variant(tmp_path, **{"corpus": {"source": str(corpus)}, "recipe": recipe})
    done = _search(spec, "--profile", "smoke", "--run-dir", str(tmp_path / "run"), "--dry-run", timeout=300)
    if refused:
        assert done.returncode == 2 and "all 50 documents are a single sentence" in done.stderr
    else:
        assert done.returncode == 0, done.stderr[-2000:]
