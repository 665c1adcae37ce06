"""Faults injected for real: a killed Train worker, a diverging trial, run directories that cannot
be written or are full, and corpora a recipe cannot use. Real processes, real kills, real Ray."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil
import pytest

from tests.conftest import FEW_ITEMS, ROOT, patched_search_env, smoke_search_command, spec_variant


def _search(*args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "platform.search", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


SEARCH_MARK = "DOCTUNE_TEST_SEARCH"  # forwarded to the search's workers, as every DOCTUNE_ variable is


def _train_workers(mark: str) -> list[psutil.Process]:
    """The Train workers of the search started with ``SEARCH_MARK=mark``: another Ray's on this host
    (a search beside the suite) are left alone."""
    workers = []
    for process in psutil.process_iter(["cmdline"]):
        if any("RayTrainWorker" in part for part in process.info["cmdline"] or []):
            try:
                if process.environ().get(SEARCH_MARK) == mark:
                    workers.append(process)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
    return workers


def _wait_for_checkpoint(search: subprocess.Popen, run_dir, step: int) -> None:
    """Until Ray Train has registered the round that ends at ``step``: its checkpoint manager's
    snapshot names it (written as the round is registered, before the report goes on to Tune; the
    round's directory appears earlier, while its copy is made)."""
    deadline = time.monotonic() + 600
    name = f'"step_{step:06d}"'
    while not any(name in p.read_text() for p in run_dir.glob("trials/*/checkpoints/checkpoint_manager_snapshot.json")):
        assert search.poll() is None and time.monotonic() < deadline, f"no round registered at step {step}"
        time.sleep(0.2)


@pytest.mark.ray  # runs a search
def test_killed_workers_resume_from_their_checkpoints_and_a_later_divergence_ends_the_trial(tmp_path):
    """One search, three faults, each answered by its own mechanism:

    1. one Train worker SIGKILLed after the first checkpoint: Ray Train restarts the worker group
       (``train.max_worker_failures: 1``) from that checkpoint, and the steps go on;
    2. the whole worker group SIGKILLed after the second: Train has no restart left, the Train run
       fails, and Tune restarts the trial (``train.max_trial_failures: 1``) from that checkpoint;
    3. the loss made NaN at step 7: the trial ends as errored with the reason, is not retried, and
       the search goes on to its report."""
    import optuna

    from platform.strategies.optuna_base import optuna_storage

    changes = {
        "train.steps": 8,
        "search.samples": 1,
        "train.max_worker_failures": 1,
        "train.max_trial_failures": 1,
        "train.overlap_scoring": False,  # training waits for each round's scores: the kills land in that wait
        "evaluation.limits": FEW_ITEMS,  # what is tested is the restarts, not the scores
    }
    spec = spec_variant("smoke", tmp_path, **changes)
    run_dir = tmp_path / "run"
    mark = uuid.uuid4().hex
    log = (tmp_path / "search.log").open("w")
    search = subprocess.Popen(
        smoke_search_command(spec, run_dir),
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
        env={**patched_search_env(nan_at_step=7), SEARCH_MARK: mark},  # the loss becomes NaN at step 7
    )
    try:
        _wait_for_checkpoint(search, run_dir, 2)
        victim = max(_train_workers(mark), key=lambda p: p.pid)
        victim.send_signal(signal.SIGKILL)
        _wait_for_checkpoint(search, run_dir, 4)
        group = _train_workers(mark)
        for worker in group:
            worker.send_signal(signal.SIGKILL)
        assert search.wait(timeout=600) == 0
    finally:
        if search.poll() is None:
            search.kill()
    output = (tmp_path / "search.log").read_text()
    assert not psutil.pid_exists(victim.pid) or victim.status() == psutil.STATUS_ZOMBIE
    assert group and "resumed from step_000002" in output  # the new worker group started from the checkpoint
    assert "resumed from step_000004" in output  # Tune's restart of the trial did too
    assert "resumed from step_000006" not in output  # the divergence was not retried
    # the trial's error on the console at the default verbosity: its worker's line and Tune's
    assert "loss became nan at step 7; the trial ends" in output and "Trial task failed" in output
    (trial,) = [r for r in json.loads((run_dir / "leaderboard.json").read_text())["rows"] if r["trial"] != "baseline"]
    assert trial["status"].startswith("error after round 3") and "loss became nan at step 7" in trial["status"]
    assert trial["step"] in (2, 4, 6) and trial["objective"] is not None
    steps = sorted(int(p.name[5:]) for p in run_dir.glob(f"trials/{trial['trial']}/checkpoints/step_*"))
    assert steps == [2, 4, 6]
    scored = sorted(int(p.parent.name[5:]) for p in run_dir.glob(f"trials/{trial['trial']}/checkpoints/*/scores.json"))
    assert scored == [2, 4, 6]  # every round scored once, none lost to either restart
    # the restarted workers went on reading their documents from where each checkpoint left them:
    # by step 6 each has read six batches' worth (a stream restarted from the start would be at two)
    checkpoint = run_dir / "trials" / trial["trial"] / "checkpoints" / "step_000006"
    positions = json.loads((checkpoint / "training_state" / "state.json").read_text())["stream_positions"]
    batch_size = json.loads((checkpoint / "doctune.json").read_text())["hyperparameters"]["batch_size"]
    per_worker = batch_size // len(positions)
    assert all(epoch == 0 and 6 * per_worker <= offset < 7 * per_worker for epoch, offset in positions), positions
    (result_file,) = run_dir.glob("tune/*/*/result.json")
    reported = [json.loads(line)["step"] for line in result_file.read_text().splitlines() if line.strip()]
    # each restart reported its earlier rounds again (a report may be lost with a killed driver), then
    # the step count went on from its checkpoint, not back to 0
    assert reported[-3:] == [2, 4, 6] and set(reported) == {2, 4, 6}, reported
    # without train.overlap_scoring each round is reported at its own step, training waiting for it
    reports = [json.loads(line) for line in result_file.read_text().splitlines() if line.strip()]
    assert all(r["report_step"] == r["step"] and r["eval_seconds"] >= r["scoring_seconds"] for r in reports)
    assert (run_dir / "best" / "doctune.json").exists()  # the search went on to its report and export
    study = optuna.load_study(study_name="smoke", storage=optuna_storage(run_dir))
    assert len(study.trials) == 1 and study.trials[0].state.is_finished()


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


@pytest.fixture(scope="module")
def one_sentence_corpus(tmp_path_factory) -> Path:
    """50 one-sentence documents: one file, so its preparation (a Ray Data job) is done once and cached."""
    corpus = tmp_path_factory.mktemp("one_sentence") / "corpus.jsonl"
    corpus.write_text(
        "".join(json.dumps({"text": f"Short note number {i} about the budget."}) + "\n" for i in range(50))
    )
    return corpus


@pytest.mark.ray  # preparing the corpus starts Ray
@pytest.mark.own_ray  # its own, at RAY_ADDRESS=local
@pytest.mark.parametrize(("recipe", "refused"), [("docsplit", True), ("simcse", False)])
def test_a_corpus_of_one_sentence_documents_is_refused_for_docsplit_only(
    tmp_path, one_sentence_corpus, recipe, refused
):
    corpus = one_sentence_corpus
    # no MLM term: 50 short notes are too little text to train a masked-LM head on (refused on its
    # own, tests/trainers/test_mlm_head.py)
    no_mlm = {"search.space.mlm_weight": {"choice": [0.0]}, "search.warm_start": []}
    spec = spec_variant("smoke", tmp_path, **{"corpus": {"source": str(corpus)}, "recipe": recipe, **no_mlm})
    # -q: the refusal still said, and a dry run's plan printed alone (no progress line before it)
    done = _search(spec, "--profile", "smoke", "--run-dir", str(tmp_path / "run"), "--dry-run", "-q", timeout=300)
    if refused:
        assert done.returncode == 2 and "all 50 documents are a single sentence" in done.stderr
    else:
        assert done.returncode == 0, done.stderr[-2000:]
        assert json.loads(done.stdout)["resolved_spec"]["recipe"] == recipe


@pytest.mark.ray  # preparing the corpus starts Ray
@pytest.mark.own_ray  # its own, at RAY_ADDRESS=local
def test_a_corrupt_corpus_found_while_preparing_it_is_refused_with_nothing_left(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"text": "A fine first document. It has two sentences."}) + "\n{broken\n")
    spec = spec_variant("smoke", tmp_path, **{"corpus": {"source": str(corpus)}})
    done = _search(spec, "--profile", "smoke", "--run-dir", str(tmp_path / "run"), timeout=300)
    assert done.returncode == 2, done.stderr[-2000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("doctune: error:")]
    assert errors == [
        f"doctune: error: corpus {corpus} line 2 is not JSON (Expecting property name enclosed in double quotes)"
    ]
    assert not (tmp_path / "run").exists()
