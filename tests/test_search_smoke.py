"""The whole product: the smoke search end to end, through the CLI, on real Ray nodes. The suite's
one smoke search runs on two nodes of this machine, its trials, Train workers and evaluators on one
in a mount namespace of its own that shares no directory with the driver, and keeps its run in a
bucket of a real S3-compatible server (``--storage``: the trials and Tune write there, the
driver's records follow). It is killed with SIGKILL mid-run (the driver and every process it
started), both nodes are stopped and the driver's run directory deleted, and ``--resume`` finishes
it on two fresh nodes from the bucket alone: every test of the search's products reads the resumed
run (its trials' and Tune's files as the bucket holds them: ``kept``), and one test checks that the
kill lost and reran nothing."""

from __future__ import annotations

import contextlib
import html
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import psutil
import pytest

from doctune_core.noise import MIN_ITEMS
from evaluators.readings import READINGS_ENV, read_ledger
from tests.conftest import (
    FEW_ITEMS,
    ROOT,
    closed_port,
    documented_plugins,
    outside_the_checkout,
    plugin_package,
    prepared_here,
    run_smoke_search,
    smoke_search_command,
    spec_variant,
    trial_rows,
)
from tests.local_nodes import LocalNodes
from tests.servers import mlflow_server, s3_server
from tests.wandb_records import offline_runs

pytestmark = pytest.mark.ray  # starts Ray and runs searches


def _tracked(mlflow_url: str) -> dict:
    """The spec change that records a search at the MLflow tracking server ``mlflow_url`` and in
    offline W&B run files (in the run directory)."""
    return {
        "tracking.mlflow": {"tracking_uri": mlflow_url},
        "tracking.wandb": {"project": "doctune-smoke", "mode": "offline"},
    }


@pytest.fixture(scope="module", autouse=True)
def ledger(tmp_path_factory) -> Iterator[Path]:
    """The module's own ledger of locked-part readings (``evaluators.readings``), so the smoke search's
    readings are counted apart from the rest of the suite's; the driver writes it, wherever it scored."""
    path = tmp_path_factory.mktemp("ledger") / "readings.jsonl"
    suite = os.environ[READINGS_ENV]
    os.environ[READINGS_ENV] = str(path)
    yield path
    os.environ[READINGS_ENV] = suite


@pytest.fixture(scope="module")
def tracking_server(tmp_path_factory):
    """A real MLflow tracking server, up for the module's tests (the killed smoke search records into
    it, and its resume goes on recording there)."""
    with mlflow_server(tmp_path_factory.mktemp("mlflow")) as url:
        yield url


@pytest.fixture(scope="module")
def smoke_corpus() -> Path:
    """The smoke spec's corpus, prepared before the two-node cluster starts (``_two_nodes``: its
    node would write the shards where the driver cannot see them)."""
    return prepared_here("smoke", "smoke")


@pytest.fixture(scope="module")
def bucket(tmp_path_factory):
    """The ``--storage`` URI the smoke search is copied to, in a bucket of a real S3-compatible server
    (moto) up for the module's tests."""
    with s3_server(tmp_path_factory.mktemp("s3")) as server:
        server.create_bucket("runs")
        yield server.uri("runs", "smoke")


@dataclass(frozen=True)
class Killed:
    """What the smoke search had when it was killed: the trials with a reported checkpoint, each
    checkpoint and when it was written, the trials that had finished, the trial whose second round
    was being scored, whether a leaderboard was written, and where the cluster ran each actor."""

    scored: set[str]
    checkpoints: dict[str, int]
    finished: set[str]
    interrupted: str
    had_leaderboard: bool
    placement: Placement


@dataclass(frozen=True)
class Placement:
    """Where one cluster ran the search's actors, as Ray's state API lists them: the node that
    declared CPUs (the head declares none), and each actor's class and node."""

    worker: str
    actors: list[dict]


def _kill_tree(pid: int) -> None:
    root = psutil.Process(pid)
    processes = [root, *root.children(recursive=True)]
    for process in processes:
        try:
            process.send_signal(signal.SIGKILL)
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(processes, timeout=30)


def _checkpoints(files) -> dict[str, int]:
    """Each reported checkpoint in the run's files and when it was persisted, read off its record,
    which every checkpoint keeps (a checkpoint directory itself changes when its training state or,
    once the trial has ended, its weights are released: train.keep_checkpoints)."""
    import pyarrow.fs

    selector = pyarrow.fs.FileSelector(files.path("trials"), recursive=True, allow_not_found=True)
    found = {files.relative(info.path): info.mtime_ns for info in files.filesystem.get_file_info(selector)}
    return {
        name.removesuffix("/doctune.json"): mtime
        for name, mtime in found.items()
        if re.fullmatch(r"trials/[^/]+/checkpoints/step_\d+/doctune\.json", name)
    }


def _trials_with(files, *round_names: str) -> tuple[set[str], ...]:
    """For each of ``round_names`` (``step_000002``), the trials whose round was reported, with its
    scores, to the run's files: one listing of them (the killed search polls it)."""
    names = list(files.listing("trials"))
    return tuple(
        {name.split("/")[0] for name in names if re.fullmatch(rf"[^/]+/checkpoints/{round_name}/scores\.json", name)}
        for round_name in round_names
    )


def _with_a_w_and_b_service_to_leave_alone() -> dict[str, str]:
    """This environment with ``WANDB_SERVICE`` naming a W&B service that does not answer. W&B sets
    it for the children of a process that used W&B (this test runner, once a tracking test ran):
    a search that took the runner's service would leave its killed runs open there, and the resumed
    search could not open them again; this one would fail every W&B run. The search starts its own."""
    return {**os.environ, "WANDB_SERVICE": f"3-{os.getpid()}-tcp-localhost-{closed_port()}"}


def _in_wandb(run_dir, trial: str, step: int) -> bool:
    """Whether W&B's offline run file for ``trial`` in ``run_dir`` holds ``step`` (it writes its file
    every second: platform.tracking.trackers.wandb_runs)."""
    try:
        runs = offline_runs(run_dir)
    except Exception:  # a record still being written
        return False
    return step in [logged for logged, _ in runs.get(trial, {}).get("history", [])]


def _in_the_buckets_wandb(storage, into: Path, trial: str, step: int) -> bool:
    """``_in_wandb`` of W&B's offline run files as the bucket holds them (the driver uploads its
    records every few seconds: platform.rundir.records)."""
    shutil.rmtree(into, ignore_errors=True)
    try:
        storage.pull(into, under=("wandb/",))
    except FileNotFoundError:  # a file replaced between the listing and its fetch: whole at the next look
        return False
    return _in_wandb(into, trial, step)


@contextlib.contextmanager
def _two_nodes() -> Iterator[tuple[LocalNodes, dict[str, str]]]:
    """A Ray head that declares no CPU, and a node with this machine's two CPUs in a mount namespace
    of its own, where a tmpfs hides ``/tmp`` (the driver's run directory under it, its own Ray temp
    directory there) and doctune's cache: every trial, Train worker and evaluator runs on a node that
    shares no directory with the driver. Yields the nodes and the driver's environment."""
    from doctune_core.data import cache_dir

    assert os.geteuid() == 0 and shutil.which("unshare"), "the smoke search's second node needs unshare, as root"
    env = {name: value for name, value in os.environ.items() if name != "RAY_ADDRESS"}  # the suite's "local"
    # `ray start` turns token auth on by default; this throwaway cluster on one machine runs without
    env |= {"RAY_AUTH_MODE": "disabled", "PYTHONPATH": str(ROOT)}
    nodes = LocalNodes(env)
    try:
        nodes.start_head(cpus=0, dashboard=True)
        nodes.add(hiding=[Path(tempfile.gettempdir()), cache_dir()], cpus=2)
        nodes.wait_until_alive(2)
        yield nodes, {**_with_a_w_and_b_service_to_leave_alone(), **env, "RAY_ADDRESS": nodes.address}
    finally:
        nodes.stop()


def _placement(nodes: LocalNodes) -> Placement:
    (worker,) = [node["id"] for node in nodes.nodes() if node["alive"] and node["resources"].get("CPU")]
    return Placement(worker, nodes.actors())


@pytest.fixture(scope="module")
def killed(tmp_path_factory, tracking_server, bucket, smoke_corpus):
    """The smoke spec's search, tracked in MLflow and W&B and kept in ``bucket`` (the spec beside the
    run directory, ``smoke.yaml``), on two nodes (``_two_nodes``), killed with SIGKILL once its first
    trial has finished and its second has reported its first round (W&B has it, in the bucket) and
    saved its second, while the pool scores it (a round takes seconds to score, so the kill lands
    inside that window); then both nodes are stopped and the driver's run directory deleted: the
    resumed trial goes on from its first round, as the bucket alone holds it, and trains and reports
    the second again. Returns the spec, the run directory and ``Killed``."""
    from platform.rundir.storage import RunStorage
    from trainers.checkpoint import staging_dir

    storage = RunStorage.open(bucket, writable=False)
    directory = tmp_path_factory.mktemp("search")
    run_dir, wandb_view = directory / "smoke", directory / "wandb-in-the-bucket"
    spec = spec_variant("smoke", directory, **_tracked(tracking_server), **{"evaluation.references": True})
    command = [*smoke_search_command(spec, run_dir), "--storage", bucket]
    with _two_nodes() as (nodes, env):
        driver = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        deadline = time.monotonic() + 600
        try:
            while time.monotonic() < deadline:
                finished, reported = _trials_with(storage, "step_000004", "step_000002")
                # rank 0 stages a round on its own node, which this process sees through the node's root
                staged = {t: nodes.seen_by(1, staging_dir(t) / "step_000004" / "doctune.json") for t in reported}
                scoring = {t for t in reported - finished if staged[t].exists()}
                if (
                    finished
                    and scoring
                    and _in_the_buckets_wandb(storage, wandb_view, (interrupted := min(scoring)), 2)
                ):
                    break
                assert driver.poll() is None, "the search ended before it could be interrupted"
                time.sleep(0.5)  # a round takes seconds to score; each look lists the bucket
            else:
                raise AssertionError("no second trial reached its second round within 10 minutes")
        finally:
            _kill_tree(driver.pid)
        placement = _placement(nodes)
    checkpoints = _checkpoints(storage)
    scored = {name.split("/")[1] for name in checkpoints if storage.is_file(f"{name}/scores.json")}
    had_leaderboard = storage.is_file("leaderboard.json")
    shutil.rmtree(run_dir)  # the driver's machine is gone: the resume has the bucket alone
    return spec, run_dir, Killed(scored, checkpoints, finished, interrupted, had_leaderboard, placement)


@pytest.fixture(scope="module")
def resumed(killed, bucket):
    """The killed smoke search finished by ``--resume`` on two fresh nodes, from the bucket alone: its
    run directory, the resume's output (stdout, then stderr, where Ray's workers' lines may land) and
    where the cluster ran its actors."""
    spec, run_dir, _ = killed
    with _two_nodes() as (nodes, env):
        done = run_smoke_search(spec, run_dir, "--storage", bucket, "--resume", env=env)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        placement = _placement(nodes)
    return run_dir, done.stdout + done.stderr, placement


@pytest.fixture(scope="module")
def smoke_run(resumed):
    """The finished smoke search: its driver's run directory and the resume's output."""
    run_dir, output, _ = resumed
    return run_dir, output


@pytest.fixture(scope="module")
def kept(smoke_run, bucket, tmp_path_factory):
    """The finished smoke search as its bucket holds it, fetched whole into a directory: the trials'
    and Tune's files (written there by them, never in the driver's run directory) and the driver's
    records."""
    from platform.rundir.storage import RunStorage

    view = tmp_path_factory.mktemp("kept") / "smoke"
    RunStorage.open(bucket, writable=False).pull(view, under=("",))
    return view


def test_a_search_killed_with_sigkill_resumes_losing_and_rerunning_nothing(killed, smoke_run, bucket, tracking_server):
    """Resumed on fresh nodes from the bucket alone, the interrupted trial continued from its
    reported checkpoint; no finished trial, reported checkpoint or baseline score was redone; the
    trials kept their ids; Optuna's study and the MLflow record went on as one (W&B's, the offline
    run files merged: test_wandb_has_each_trial_every_round_and_the_winner_as_a_model)."""
    import optuna

    from doctune_core.run_files import RunFiles
    from platform.strategies.optuna_base import optuna_storage

    _, run_dir, before = killed
    _, stdout = smoke_run
    assert len(before.finished) == 1 and not before.had_leaderboard, "the first trial, and only it, had finished"
    assert before.interrupted not in before.finished
    assert before.scored == before.finished | {before.interrupted}, "the second trial's second round was being scored"
    rows = json.loads((run_dir / "leaderboard.json").read_text())["rows"]
    trials = trial_rows(rows)
    assert len(trials) == 2 and {r["status"] for r in trials} == {"completed"}
    assert {r["trial"] for r in trials} == before.scored  # the same trial ids
    after = _checkpoints(RunFiles.at(bucket))
    assert all(after[path] == mtime for path, mtime in before.checkpoints.items()), "a saved checkpoint was rewritten"
    assert len(after) == 4  # 2 trials x 2 rounds: nothing trained twice, nothing missing
    assert f"[{before.interrupted}] resumed from step_000002" in stdout
    assert f"doctune: fetched the run's records from {bucket} into {run_dir}" in stdout
    assert "scoring the base model" not in stdout  # its scores were in the bucket: not scored again
    study = optuna.load_study(study_name="smoke", storage=optuna_storage(run_dir))
    assert [t.state for t in study.trials] == [optuna.trial.TrialState.COMPLETE] * 2
    params = sorted(t.params["temperature"] for t in study.trials)
    assert params == pytest.approx(sorted(r["hyperparameters"]["temperature"] for r in trials))
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=tracking_server)
    runs = client.search_runs([client.get_experiment_by_name("smoke").experiment_id])
    parents = [run for run in runs if "mlflow.parentRunId" not in run.data.tags]
    children = [run.info.run_name for run in runs if run.data.tags.get("mlflow.parentRunId")]
    assert len(parents) == 1 and sorted(children) == sorted(r["trial"] for r in rows)  # each run once


def test_every_trial_train_worker_and_evaluator_ran_on_the_node_that_shares_no_directory(killed, resumed):
    """Ray's state API: on both clusters, the killed search's and the resume's, each trial's actor,
    its Train workers and the evaluators ran on the node in its own mount namespace (the head
    declares no CPU), which reached the run, its checkpoints and its inputs through the bucket alone."""
    searching = ("ImplicitFunc", "RayTrainWorker", "Evaluator")  # Tune's actor of a function trainable: a trial
    for placement in (killed[2].placement, resumed[2]):
        ran = {}
        for actor in placement.actors:
            # an actor still waiting for its resources when the driver was killed never ran: no node
            if actor["node"]:  # the state API names a class by its qualified name at times
                ran.setdefault(actor["class"].rsplit(".", 1)[-1], set()).add(actor["node"])
        elsewhere = {name: ran.get(name) for name in searching if ran.get(name) != {placement.worker}}
        assert not elsewhere, f"not (only) on the worker node {placement.worker}: {elsewhere}; every actor: {ran}"


def test_leaderboard_has_every_trial_and_the_baseline_with_finite_scores(smoke_run, kept):
    run_dir, stdout = smoke_run
    rows = json.loads((run_dir / "leaderboard.json").read_text())["rows"]
    assert [r["trial"] for r in rows].count("baseline") == 1 and len(rows) == 6  # 2 trials, 3 references
    for row in rows:
        if row["trial"] == "reference-bm25":  # no probe: no objective, its retrieval score only
            assert row["objective"] is None and set(row["scores"]) == {"news-title-retrieval"}
            continue
        assert set(row["scores"]) == {"news-title-retrieval", "r8-fewshot"}
    trials = trial_rows(rows)
    best = max(trials, key=lambda r: r["objective"])
    for row in rows:  # the test part is read for the rows reported (baselines, references, the winner) only
        if row["trial"] == "reference-bm25":
            continue
        parts = ("val", "test") if row["trial"] not in {t["trial"] for t in trials} or row is best else ("val",)
        assert math.isfinite(row["objective"]) and (row["test_objective"] is None) == (parts == ("val",))
        for scores in row["scores"].values():
            assert all(math.isfinite(scores[p]["main"]) and scores[p]["main_se"] >= 0 for p in parts)
            assert "test" in scores or parts == ("val",)
        if parts == ("val",):
            assert not any("test" in scores for scores in row["scores"].values()), row["trial"]
    for row in trials:  # the objective is the chosen checkpoint's validation objective, its rounds read no test part
        scores = json.loads(
            (kept / "trials" / row["trial"] / "checkpoints" / f"step_{row['step']:06d}" / "scores.json").read_text()
        )
        assert row["objective"] == pytest.approx(sum(scores[t]["val"]["main"] for t in scores) / 2)
        assert not any("test" in parts for parts in scores.values())
    tested = {t: best["scores"][t]["test"]["main"] for t in ("news-title-retrieval", "r8-fewshot")}
    assert best["test_objective"] == pytest.approx(sum(tested.values()) / 2)
    # the winner's test gain over the baseline, with its paired-bootstrap interval, is on the board
    gain = best["gains"]["baseline"]
    baseline = next(r for r in rows if r["trial"] == "baseline")
    assert gain["difference"] == pytest.approx(best["test_objective"] - baseline["test_objective"], abs=1e-9)
    assert gain["low"] <= gain["difference"] <= gain["high"]
    assert gain["beyond_noise"] == (gain["low"] > 0 or gain["high"] < 0)
    assert "The winner over baseline on test (unbiased)" in stdout
    # how far training moved each trial's embeddings of the short validation texts from its start's: reported
    for row in trials:
        assert set(row["start_cosine"]) == {"news-title-retrieval", "r8-fewshot"}, row["status"]
        assert all(0.0 < value <= 1.0 + 1e-6 for value in row["start_cosine"].values())
    assert "embeddings of short validation texts, mean cosine to its untrained start" in stdout
    assert not any(row["start_cosine"] for row in rows if row["trial"] not in {t["trial"] for t in trials})
    assert {r["status"] for r in trials} == {"completed"}
    assert all(0.3 <= r["hyperparameters"]["split_probability"] <= 0.7 for r in trials)
    # the spec's two warm starts: DocSplit's own setting, and the same with a learning rate 100x too high
    assert sorted(r["hyperparameters"]["lr"] for r in trials) == [5e-5, 5e-3]
    csv_lines = (run_dir / "leaderboard.csv").read_text().splitlines()
    assert len(csv_lines) == 7 and "hp.temperature" in csv_lines[0]
    assert "rank  trial" in stdout and "baseline" in stdout


def test_the_winner_is_placed_against_bm25_and_the_base_as_users_run_it_item_by_item_and_by_length(smoke_run):
    """The reference rows (BM25, the off-the-shelf base truncated and windowed) scored the trials' own
    items; the winner's gain over each, task by task and per length bucket of the documents to find,
    is on the board, in the summary and on the page, with the score-against-length plot."""
    run_dir, stdout = smoke_run
    rows = {r["trial"]: r for r in json.loads((run_dir / "leaderboard.json").read_text())["rows"]}
    references = {"reference-bm25", "reference-off-the-shelf", "reference-off-the-shelf-windowed"}
    assert references <= set(rows) and all(rows[r]["status"].startswith("reference: ") for r in references)
    record = json.loads((run_dir / "references.json").read_text())
    assert record["reference-off-the-shelf-windowed"]["reading"] == {"max_length": 256, "long_inputs": "chunk"}
    best = max(trial_rows(list(rows.values())), key=lambda r: r["objective"])
    news = {name: row["scores"]["news-title-retrieval"].get("test") for name, row in rows.items()}
    news = {name: values for name, values in news.items() if values is not None}  # the other trial: val only
    assert set(news) == {best["trial"], "baseline", *references}
    assert len({values["items_digest"] for values in news.values()}) == 1  # every row scored the same queries
    buckets = [k for k in news["reference-bm25"] if k.startswith("len_") and k.endswith("_n")]
    assert buckets and all(news[name][k] >= 2 for name in news for k in buckets)  # each bucket with its n
    assert sum(news["baseline"][k] for k in buckets) <= news["baseline"]["n"]
    assert news["reference-off-the-shelf-windowed"] != news["reference-off-the-shelf"]
    assert set(best["task_gains"]) == {"baseline", *references}
    bm25 = best["task_gains"]["reference-bm25"]
    assert set(bm25) == {"news-title-retrieval"}  # paired on the task both scored
    gain = bm25["news-title-retrieval"]
    assert gain["difference"] == pytest.approx(news[best["trial"]]["main"] - news["reference-bm25"]["main"], abs=1e-9)
    assert set(gain["by_stratum"]) == {k.removesuffix("_n") for k in buckets}
    assert f"{best['trial']}'s test gain over what you have" in stdout and "  over reference-bm25  " in stdout
    # a length bucket under the rule (doctune_core.noise.MIN_ITEMS: fewer than 10 queries, as the smoke
    # part's longer buckets hold) prints no interval but says so; no training seeds were measured
    # (search.confirm_seeds), and every gain says its interval leaves their noise out
    small = {label: g for label, g in gain["by_stratum"].items() if g["n"] < MIN_ITEMS["continuous"]}
    assert small and all(g["low"] is None and g["undecided"] for g in small.values())
    assert all(g["low"] is not None for g in gain["by_stratum"].values() if g["n"] >= MIN_ITEMS["continuous"])
    assert "(too few items to decide)" in stdout
    assert not gain["seed_noise"] and "seed noise not included" in stdout
    assert (
        f"{best['trial']}'s test gain over what you have (95% interval, * beyond noise, seed noise not included)"
        in stdout
    )
    # the locked-part figures carry the digests of the parts they were read on, and how often they
    # were read before on this cache (the module's ledger: the first search to read them); so does
    # every test verdict, and the winner's row
    read = {task: parts["test"] for task, parts in best["scores"].items() if "test" in parts}
    digests = ", ".join(f"{task} {int(part['part_digest'])}" for task, part in read.items())
    assert f"doctune: locked test parts read (part digests): {digests}; the locked part's first reading" in stdout
    verdicts = [line for line in stdout.splitlines() if " on test" in line or "test gain over" in line]
    assert verdicts and all(line.endswith("[the locked part's first reading on this cache]") for line in verdicts)
    assert best["locked_reading"]["before"] == 0
    (entry,) = [e for e in read_ledger() if e.run_dir == str(run_dir)]
    assert entry.parts == best["locked_reading"]["parts"] and set(read) <= set(entry.parts)
    page = (run_dir / "report.html").read_text()
    assert '<span class="badge">reference</span>' in page and "Against what a user already has" in page
    assert "Score against document length" in page


def test_the_ranking_tells_a_sensible_configuration_from_a_bad_one_beyond_noise(smoke_run):
    """The smoke search's two trials differ by a learning rate 100x too high: the ranking's noise
    check (platform.results.ranking) must call their difference beyond noise, on validation only."""
    run_dir, stdout = smoke_run
    board = json.loads((run_dir / "leaderboard.json").read_text())
    noise, rows = board["noise"], board["rows"]
    winner = trial_rows(rows)[0]
    assert winner["hyperparameters"]["lr"] == 5e-5
    assert noise["part"] == "val" and set(noise["tasks"]) == {"news-title-retrieval", "r8-fewshot"}
    for task, values in noise["tasks"].items():
        assert 0 < values["main_se"] < 0.2 and values["n"] > 0, task
    assert "main_se_draws" in noise["tasks"]["r8-fewshot"]  # a few-shot probe's draws are part of its noise
    spread = noise["trials"]
    assert spread["encoders"] == 2 and spread["beyond_noise"] and spread["ratio"] > 3
    assert noise["runner_up"]["beyond_noise"] and noise["runner_up"]["difference"] > 0
    assert "baseline" in noise["over_baselines"]
    assert "The trials differ beyond noise" in stdout and f"ratio {spread['ratio']:.2f}" in stdout
    page = (run_dir / "report.html").read_text()
    assert "Is the ranking beyond noise?" in page and "<dt>verdict</dt><dd><b>beyond noise</b>" in page


def test_best_loads_with_transformers_and_describes_itself(smoke_run):
    import torch
    from transformers import AutoModel, AutoTokenizer

    run_dir, _ = smoke_run
    best = run_dir / "best"
    record = json.loads((best / "doctune.json").read_text())
    rows = json.loads((run_dir / "leaderboard.json").read_text())["rows"]
    winner = max(trial_rows(rows), key=lambda r: r["objective"])
    assert record["trial_id"] == winner["trial"] and record["recipe"] == "docsplit"
    assert record["objective"] == pytest.approx(winner["objective"])
    assert record["base_model"] == "all-minilm-l6-v2" and record["corpus"] == "news-articles"
    assert not (best / "training_state").exists()
    model, tokenizer = AutoModel.from_pretrained(best), AutoTokenizer.from_pretrained(best)
    with torch.no_grad():
        out = model(**tokenizer(["a document about elections"], return_tensors="pt")).last_hidden_state
    assert out.shape[-1] == 384 and torch.isfinite(out).all()


def test_every_round_was_scored_and_an_ended_trial_keeps_only_its_rows_weights(smoke_run, kept, tmp_path):
    run_dir, _ = smoke_run
    rows = json.loads((run_dir / "leaderboard.json").read_text())["rows"]
    trials = trial_rows(rows)
    assert not (run_dir / "trials").exists()  # the trials write theirs in the bucket only
    checkpoints = sorted(kept.glob("trials/*/checkpoints/step_*"))
    assert len(checkpoints) == 4 and not list(kept.glob("trials/**/*.partial"))  # 2 trials x 2 rounds
    rows_rounds = {(r["trial"], Path(r["checkpoint"]).name) for r in trials}
    for checkpoint in checkpoints:
        scores = json.loads((checkpoint / "scores.json").read_text())  # every round's scores stay
        assert set(scores) == {"news-title-retrieval", "r8-fewshot"}
        files = {p.name for p in checkpoint.iterdir()}
        assert "training_state" not in files  # ended trials never resume
        if (checkpoint.parent.parent.name, checkpoint.name) in rows_rounds:
            assert {"model.safetensors", "config.json", "doctune.json"} <= files
        else:  # train.keep_checkpoints: best
            assert files == {"doctune.json", "scores.json", "report.json", "steps.json"}
        # each of the round's steps: its loss, its views' cosines and its gradient norm (before clipping)
        steps = json.loads((checkpoint / "steps.json").read_text())
        last = int(checkpoint.name.removeprefix("step_"))
        assert [s["step"] for s in steps] == [last - 1, last]
        for step in steps:
            assert math.isfinite(step["loss"]) and step["grad_norm"] > 0
            assert -1 <= step["negative_cosine"] <= 1 and -1 <= step["positive_cosine"] <= 1
    for row in trials:
        released = json.loads((kept / "trials" / row["trial"] / "released.json").read_text())
        assert released["policy"] == "best" and released["bytes"] > 0
        assert released["weights_kept"] == Path(row["checkpoint"]).name
    for row in trials:  # every trial the leaderboard lists still exports, from the run directory (its trials fetched)
        target = tmp_path / row["trial"]
        done = subprocess.run(
            [sys.executable, "-m", "platform.export", str(run_dir), "--trial", row["trial"], "--to", str(target)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        assert (target / "model.safetensors").exists()


def test_tensorboard_shows_every_trial(kept):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    # one directory per trial; the interrupted trial's holds a second events file, its resumed run's
    trial_dirs = sorted({p.parent for p in kept.glob("tune/smoke/*/events.out.tfevents.*")})
    assert len(trial_dirs) == 2
    steps = json.loads((kept / "search.json").read_text())["trial_plan"]["steps"]
    for trial_dir in trial_dirs:
        events = EventAccumulator(str(trial_dir))
        events.Reload()
        tags = events.Tags()["scalars"]
        for name in ("objective", "loss", "tokens_per_s", "news-title-retrieval/ndcg_at_10", "r8-fewshot/macro_f1"):
            assert any(tag.endswith(name) for tag in tags), (name, tags)
        assert not any("test" in tag for tag in tags), tags  # test scores only for the chosen round, elsewhere
        objective = next(tag for tag in tags if tag.endswith("/objective"))
        # the interrupted trial's first round reached TensorBoard before the kill, and again from its resume
        assert [e.step for e in events.Scalars(objective)] in ([1, 2], [1, 1, 2])
        assert "_hparams_/session_start_info" in events.PluginTagToContent("hparams")
        # and every training step's loss, views' cosines and gradient norm, on the axis of steps
        for name in ("loss", "contrastive_loss", "positive_cosine", "negative_cosine", "grad_norm"):
            stepped = {e.step for e in events.Scalars(f"step/{name}")}
            assert stepped == set(range(1, steps + 1)), (name, stepped)


# TensorBoard's own file system for s3:// (boto3), pointed at the test's server by S3_ENDPOINT, which
# it reads when first imported: a process of its own
TENSORBOARD_FROM_A_BUCKET = """
import json, sys
from tensorboard.backend.event_processing.plugin_event_multiplexer import EventMultiplexer
runs = EventMultiplexer().AddRunsFromDirectory(sys.argv[1])
runs.Reload()
print(json.dumps({run: runs.GetAccumulator(run).Tags()["tensors"] for run in runs.Runs()}))
"""


def test_tensorboard_reads_every_trial_straight_from_the_bucket(smoke_run, bucket):
    """``tensorboard --logdir s3://BUCKET/RUN/tune`` on a cluster with no shared file system."""
    location, query = bucket.split("?")
    endpoint = dict(pair.split("=") for pair in query.split("&"))["endpoint_override"]
    done = subprocess.run(
        [sys.executable, "-c", TENSORBOARD_FROM_A_BUCKET, f"{location}/tune"],
        env={**os.environ, "S3_ENDPOINT": f"http://{endpoint}"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    runs = json.loads(done.stdout.strip().splitlines()[-1])
    trials = {run: tags for run, tags in runs.items() if any(tag.endswith("/objective") for tag in tags)}
    assert len(trials) == 2, runs


def test_no_per_round_record_holds_a_test_score(smoke_run, kept):
    """The locked test part is read for the winner once the search has chosen it, and reported
    once: Tune's per-trial records and the rounds' own records beside each checkpoint hold
    validation keys only (the leaderboard's rows: the test above). Checked by key sets: every key the
    winner's test scores take when flattened as a round's metrics are, and ``test_objective``."""
    import csv

    from evaluators.scores import flatten

    run_dir, _ = smoke_run
    rows = json.loads((run_dir / "leaderboard.json").read_text())["rows"]
    best = max(trial_rows(rows), key=lambda r: r["objective"])
    test_keys = set(flatten({task: {"test": parts["test"]} for task, parts in best["scores"].items()}))
    assert test_keys and all(key.startswith("test/") for key in test_keys)
    forbidden = test_keys | {"test_objective"}
    records = {}
    for trial_dir in sorted(kept.glob("tune/smoke/*/")):
        lines = (trial_dir / "result.json").read_text().splitlines()
        records[f"{trial_dir.name}/result.json"] = set().union(*(json.loads(line) for line in lines if line.strip()))
        with (trial_dir / "progress.csv").open() as handle:
            records[f"{trial_dir.name}/progress.csv"] = set(next(csv.reader(handle)))
    for report in kept.glob("trials/*/checkpoints/step_*/report.json"):
        records[str(report.relative_to(kept))] = set(json.loads(report.read_text()))
    assert len(records) >= 2 * 2 + 2 and all("objective" in keys for keys in records.values())
    for where, keys in records.items():
        assert not keys & forbidden, (where, sorted(keys & forbidden))
        assert not any(key.startswith("test/") for key in keys), where
    # the winner's test scores are on the board, once
    assert best["test_objective"] is not None and all("test" in parts for parts in best["scores"].values())


GOLDEN = Path(__file__).parent / "golden" / "smoke_search.json"  # the record, with the float kernels it was taken on


def float_kernels() -> str:
    """What decides the smoke search's floats beside its code: torch's version, the CPU kernels ATen
    dispatches to and the processor they run on (an AMD and an Intel processor, both AVX-512, trained
    the same trials to different values). The same code trains the same trials to other values on
    a machine with other kernels (the baseline's and references' scores agree; the trials' drift as
    they train)."""
    import torch

    from platform.cluster.environment import cpu_model

    return f"torch {torch.__version__}, ATen CPU capability {torch.backends.cpu.get_cpu_capability()}, {cpu_model()}"


def golden_file() -> Path:
    """The record taken on a machine with this one's float kernels, else ``GOLDEN``."""
    slug = re.sub(r"[^a-z0-9]+", "-", float_kernels().lower()).strip("-")
    own = GOLDEN.with_name(f"smoke_search.{slug}.json")
    return own if own.exists() else GOLDEN


def kernel_free(record: dict) -> dict:
    """What a record holds that no float kernel moves: the baseline's and references' scores (an
    untrained encoder's embeddings) and each trial's hyperparameters (the sampler's draws)."""
    return {
        "baseline_and_references": record["baseline_and_references"],
        "trials": [{"hyperparameters": trial["hyperparameters"]} for trial in record["trials"]],
    }


def _validation(scores: dict) -> dict:
    return {task: parts["val"] for task, parts in scores.items() if "val" in parts}


def golden_record(run_dir: Path) -> dict:
    """What the smoke spec's search decides and measures, for ``GOLDEN``: its trials in Tune's
    order (each one's hyperparameters, chosen step and objective, and every round's validation
    scores), and the baseline's and the references' validation scores. ``run_dir``: the whole run,
    its trials' and Tune's files included."""
    rows = {row["trial"]: row for row in json.loads((run_dir / "leaderboard.json").read_text())["rows"]}
    # Tune's trial directories: run_trial_<trial id>_<Tune's index>_<parameters>_<time>
    in_order = sorted(run_dir.glob("tune/smoke/run_trial_*"), key=lambda p: int(p.name.split("_")[3]))
    trials = []
    for trial in (directory.name.split("_")[2] for directory in in_order):
        checkpoints = sorted((run_dir / "trials" / trial / "checkpoints").glob("step_*/scores.json"))
        trials.append(
            {
                "hyperparameters": rows[trial]["hyperparameters"],
                "step": rows[trial]["step"],
                "objective": rows[trial]["objective"],
                "rounds": {p.parent.name: _validation(json.loads(p.read_text())) for p in checkpoints},
            }
        )
    references = {
        name: _validation(row["scores"])
        for name, row in rows.items()
        if name == "baseline" or name.startswith("reference-")
    }
    return {"trials": trials, "baseline_and_references": references}


def _departures(golden, found, where: str = "") -> list[str]:
    """Where ``found`` leaves ``golden``: a value other than recorded (floats to 1e-6) or missing;
    what the record lacks (a metric added since) is not a departure."""
    if isinstance(golden, dict):
        if not isinstance(found, dict):
            return [f"{where}: {found!r} for a mapping"]
        return [d for k, v in golden.items() for d in _departures(v, found.get(k, "<missing>"), f"{where}/{k}")]
    if isinstance(golden, list):
        if not isinstance(found, list) or len(found) != len(golden):
            return [f"{where}: {len(golden)} entries recorded, found {found!r:.80}"]
        return [d for i, (g, f) in enumerate(zip(golden, found)) for d in _departures(g, f, f"{where}[{i}]")]
    if isinstance(golden, float) and isinstance(found, (int, float)) and not isinstance(found, bool):
        return [] if abs(golden - found) <= 1e-6 else [f"{where}: {found!r}, recorded {golden!r}"]
    return [] if golden == found else [f"{where}: {found!r}, recorded {golden!r}"]


def test_the_search_decides_and_measures_as_its_golden_record(kept):
    """Trial parameters and every validation score as recorded once on a machine with these float
    kernels (``golden_file``): code that only moves must leave them where they were. On other
    kernels, what no kernel moves (``kernel_free``) until a record of their own is taken."""
    golden = json.loads(golden_file().read_text())
    golden.pop("about")
    found = golden_record(kept)
    if golden.pop("kernels") != float_kernels():
        golden, found = kernel_free(golden), kernel_free(found)
    departures = _departures(golden, found)
    assert not departures, "\n".join(departures[:20])


def test_the_console_shows_doctunes_progress_and_verdicts_and_none_of_the_libraries_internals(smoke_run):
    """At the default verbosity, doctune's lines (each trial's rounds, forwarded from its workers; the
    leaderboard; the verdicts) and nothing of Ray's, Tune's or Optuna's (``-v`` brings them back: the
    DECA search below); a failed trial's error stays shown (tests/test_faults.py)."""
    _, output = smoke_run
    assert re.search(r"\] step \d+/4 loss \d\.\d+ objective \d\.\d+ \(validation\)", output)
    assert "doctune: best trial" in output and "The winner over baseline on test" in output
    assert not [line for line in output.splitlines() if len(line) > 300]
    assert "Reporting training result" not in output  # Ray Train's round, every metric in one line
    assert "Trial status:" not in output and "Trial name" not in output  # Tune's status table
    assert "core_worker.cc" not in output and "A new study created" not in output  # Ray's and Optuna's notes
    assert not re.search(r"\b\w*Warning: ", output)  # Python's warnings


def test_every_report_file_is_written(smoke_run):
    run_dir, stdout = smoke_run
    for name in ("leaderboard.csv", "leaderboard.json", "report.html", "optuna.journal", "search.json"):
        assert (run_dir / name).stat().st_size > 0, name
    plots = sorted(p.name for p in (run_dir / "plots").glob("*.png"))
    assert plots == ["objective_over_time.png", "param_importance.png", "score_by_length.png", "task_scores.png"]
    assert all((run_dir / "plots" / p).stat().st_size > 10_000 for p in plots)
    assert "report in" in stdout
    environment = json.loads((run_dir / "search.json").read_text())["environment"]
    assert environment["packages"]["ray"] == "2.60.0" and environment["gpu"]["count"] >= 0
    assert environment["python"] and environment["cpu"]["count"] >= 1 and "git_commit" in environment


def _check_timings(run_dir) -> dict:
    """``timings.json``'s account adds up; returns it."""
    timings = json.loads((run_dir / "timings.json").read_text())
    phases = timings["phases"]
    assert {"inputs", "ray start", "evaluators start", "trials"} <= set(phases)
    assert sum(phases.values()) <= timings["wall_seconds"]
    trials = timings["trials"]
    on_the_wall = {key: trials[key] / trials["mean_concurrency"] for key in ("train_seconds", "eval_seconds")}
    assert all(0 < seconds < phases["trials"] for seconds in on_the_wall.values()), on_the_wall
    # a trial's own wall time holds its steps, its waits for scores, and its start-up and checkpoints
    assert trials["wall_seconds"] > trials["train_seconds"] + trials["eval_seconds"]
    assert trials["mean_concurrency"] >= 1.0
    assert sum(timings["shares"].values()) == pytest.approx(1.0, abs=1e-6)
    return timings


def test_the_resumed_calls_wall_time_is_accounted_for(smoke_run):
    # the call that finished the killed search: the baseline was scored before the kill, and the trial
    # that finished then is not this call's (counted, the two trials would seem to have run at once)
    run_dir, stdout = smoke_run
    timings = _check_timings(run_dir)
    assert "baseline" not in timings["phases"] and timings["trials"]["mean_concurrency"] == 1.0
    assert "wall time" in stdout and "overhead" in stdout


def test_training_goes_on_while_a_round_is_scored_and_every_round_is_reported_in_order(kept, killed):
    # train.overlap_scoring (the default): while the pool scored round 1, the trial trained on, so it
    # stood still for less than the scoring took; the last round is awaited before the trial ends
    # (quality_vs_length below runs without overlap)
    _, _, before = killed
    reports = _reports(kept)
    assert len(reports) == 2
    for trial in reports:
        rounds = [(r["eval_round"], r["step"]) for r in trial]
        # in order; the interrupted trial's resume reports its first round again (Tune may keep both)
        assert list(dict.fromkeys(rounds)) == [(1, 2), (2, 4)] and rounds == sorted(rounds)
        assert trial[-1]["report_step"] == 4 and trial[0]["report_step"] in (3, 4)
        first = trial[0]
        if first["trial_id"] in before.finished:
            assert first["eval_seconds"] < first["scoring_seconds"]
        else:  # as first reported, or reported again by the resume, its seconds counted once
            again = first["scoring_seconds"] == first["eval_seconds"] == 0
            assert again or first["eval_seconds"] < first["scoring_seconds"]


def test_the_bucket_alone_holds_the_run_and_exports_its_winner_and_its_report(smoke_run, kept, bucket, tmp_path):
    import torch
    from transformers import AutoModel, AutoTokenizer

    run_dir, stdout = smoke_run
    assert f"doctune: run records uploaded to {bucket}" in stdout
    stored = {p.relative_to(kept).as_posix(): p.stat().st_size for p in kept.rglob("*") if p.is_file()}
    local = {p.relative_to(run_dir).as_posix() for p in run_dir.rglob("*") if p.is_file() and not p.is_symlink()}
    # the driver's records, all but the embedding cache and locks, byte for byte in size (not W&B's
    # link to its service's log, which grows after the run)
    records = {f for f in local if not f.startswith("embeddings/") and not f.endswith(".lock")}
    assert {f for f in stored if not f.startswith(("trials/", "tune/", "inputs/"))} == records
    assert [f for f in records if stored[f] != (run_dir / f).stat().st_size] == []
    assert {"search.json", "leaderboard.json", "report.html", "optuna.journal", "best/model.safetensors"} <= records
    # the trials' and Tune's files are the bucket's alone: Tune's experiment, Train's runs, the rounds;
    # and the inputs the driver's cache held (the corpus, the base given its MLM head), for the nodes
    assert not {f for f in local if f.startswith(("trials/", "tune/", "inputs/"))}
    assert any(f.startswith("tune/smoke/") for f in stored) and any(f.endswith("/scores.json") for f in stored)
    assert {f.split("/")[1].split("-")[0] for f in stored if f.startswith("inputs/")} == {"corpora", "mlm_heads"}
    exported = tmp_path / "exported"
    export = [sys.executable, "-m", "platform.export", bucket, "--to", str(exported)]
    done = subprocess.run(export, cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    embeddings = []
    for model_dir in (run_dir / "best", exported):
        model, tokenizer = AutoModel.from_pretrained(model_dir), AutoTokenizer.from_pretrained(model_dir)
        with torch.no_grad():
            embeddings.append(model(**tokenizer(["a document about elections"], return_tensors="pt")).last_hidden_state)
    assert torch.equal(*embeddings)
    # its report, from the bucket's records alone
    report = [sys.executable, "-m", "platform.report", bucket, "--to", str(tmp_path / "report")]
    done = subprocess.run(report, cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    page = (tmp_path / "report" / "report.html").read_text()
    assert "Is the ranking beyond noise?" in page and f"platform.export {html.escape(bucket)} --trial" in page
    assert not (tmp_path / "report" / "trials").exists()


def test_a_fresh_machine_resumes_the_finished_search_from_its_bucket_and_reruns_nothing(
    smoke_run, tracking_server, bucket, tmp_path
):
    from platform.rundir.storage import RunStorage

    run_dir, _ = smoke_run
    fresh = tmp_path / "smoke"  # the same name: the trackers find the search's runs by it
    done = run_smoke_search(run_dir.parent / "smoke.yaml", fresh, "--resume", "--storage", bucket, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"doctune: fetched the run's records from {bucket} into {fresh}" in done.stdout
    assert "] step " not in done.stdout + done.stderr  # no trial trained a round again
    # its winner's locked part read a second time, and every test verdict says so
    assert "locked part read once before on this cache: this verdict is not independent" in done.stdout
    rows = json.loads((fresh / "leaderboard.json").read_text())["rows"]
    before = json.loads((run_dir / "leaderboard.json").read_text())["rows"]
    assert [(r["trial"], r["objective"], r["step"]) for r in rows] == [
        (r["trial"], r["objective"], r["step"]) for r in before
    ]
    storage = RunStorage.open(bucket, writable=False)
    for row in trial_rows(rows):  # the checkpoints the board names are the bucket's, never fetched whole
        assert storage.relative(row["checkpoint"]).startswith(f"trials/{row['trial']}/checkpoints/step_")
    assert not (fresh / "trials").exists() and not (fresh / "tune").exists()
    assert len(_mlflow_runs(tracking_server)) == 7  # the search and its six rows, none again


def _mlflow_runs(mlflow_url: str) -> dict:
    """The MLflow runs of the smoke search tracked at ``mlflow_url``, by run name."""
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=mlflow_url)
    experiment = client.get_experiment_by_name("smoke").experiment_id
    return {run.info.run_name: run for run in client.search_runs([experiment])}


def test_mlflow_has_the_search_each_trial_every_round_and_the_winner_as_a_model(
    smoke_run, tracking_server, monkeypatch
):
    import mlflow
    from mlflow import MlflowClient
    from sentence_transformers import SentenceTransformer

    run_dir, _ = smoke_run
    rows = json.loads((run_dir / "leaderboard.json").read_text())["rows"]
    runs = _mlflow_runs(tracking_server)
    search = runs.pop(f"smoke ({run_dir.name})")
    assert set(runs) == {row["trial"] for row in rows}
    assert all(run.data.tags["mlflow.parentRunId"] == search.info.run_id for run in runs.values())
    client = MlflowClient(tracking_uri=tracking_server)
    for row in rows:
        run = runs[row["trial"]]
        objective = client.get_metric_history(run.info.run_id, "objective")
        test = client.get_metric_history(run.info.run_id, "test_objective")
        once = [] if row["test_objective"] is None else [pytest.approx(row["test_objective"])]  # BM25 has none
        assert [m.value for m in test] == once  # test once, never per round
        assert run.info.status == "FINISHED"
        if row not in trial_rows(rows):
            continue
        assert {k: run.data.params[k] for k in ("lr", "temperature", "recipe")} == {
            k: str(row["hyperparameters"][k]) for k in ("lr", "temperature", "recipe")
        }
        assert [m.step for m in objective] == [2, 4]  # every round's validation objective
        for key in (k for k in run.data.metrics if k.startswith("test/")):  # each test score once, at the chosen round
            assert [m.step for m in client.get_metric_history(run.info.run_id, key)] == [row["step"]], key
    names = [a.path for a in client.list_artifacts(search.info.run_id)]
    assert {"leaderboard.json", "report.html", "search.json", "plots"} <= set(names)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", tracking_server)  # where models:/ is looked up, its files fetched
    model = mlflow.pyfunc.load_model("models:/smoke/1")  # the winner, registered under the experiment's name
    texts = ["a document about elections", "markets fell sharply on Monday " * 40]  # the second is truncated
    expected = SentenceTransformer(str(run_dir / "best")).encode(texts)
    assert abs(model.predict(texts) - expected).max() < 1e-5


def test_wandb_has_each_trial_every_round_and_the_winner_as_a_model(smoke_run):
    run_dir, _ = smoke_run
    rows = json.loads((run_dir / "leaderboard.json").read_text())["rows"]
    runs = offline_runs(run_dir)
    search = runs.pop(f"smoke ({run_dir.name})")
    assert set(runs) == {row["trial"] for row in rows}
    assert {run["group"] for run in runs.values()} == {search["group"]}
    for row in rows:
        run = runs[row["trial"]]
        summary = run["summary"]
        if row["test_objective"] is None:  # BM25: no probe, no objective
            assert "test_objective" not in summary
        else:
            assert summary["test_objective"] == pytest.approx(row["test_objective"])  # the chosen round's test
        if row not in trial_rows(rows):
            continue
        assert {k: run["config"][k] for k in ("lr", "temperature", "recipe")} == {
            k: row["hyperparameters"][k] for k in ("lr", "temperature", "recipe")
        }
        assert [step for step, _ in run["history"]] == [2, 4]  # every round's validation objective
        assert all(
            "objective" in values and not any(k.startswith("test") for k in values) for _, values in run["history"]
        )
        assert summary["chosen_step"] == row["step"]
    winner = next(r["trial"] for r in trial_rows(rows) if r["objective"] is not None)
    assert search["summary"]["winner"] == winner
    assert {a["type"] for a in search["artifacts"].values()} == {"search", "model"}
    assert set(next(a for a in search["artifacts"].values() if a["type"] == "model")["aliases"]) == {"best", "latest"}


def test_the_mlm_term_starts_from_the_head_trained_for_the_base(smoke_run, kept):
    # all-MiniLM-L6-v2 ships no masked-LM head: the driver trained one before the trials (or took it
    # from the cache), and the first warm start (DocSplit's own setting, mlm_weight 0.1) trained its
    # MLM term through it. A random head starts above ln(30522) = 10.3 (10.84 measured, bench/RESULTS.md)
    _, stdout = smoke_run
    assert "doctune: MLM head for all-minilm-l6-v2:" in stdout and "below the unigram baseline's" in stdout
    with_mlm = [trial for trial in _reports(kept) if trial[0]["config"]["mlm_weight"] > 0]
    assert len(with_mlm) == 1
    losses = [report["mlm_loss"] for report in with_mlm[0]]
    assert sum(losses) / len(losses) < 9.5, losses


def _reports(run_dir) -> list[list[dict]]:
    """Every trial's reports to Tune, in the order Tune received them."""
    return [
        [json.loads(line) for line in result_file.read_text().splitlines() if line.strip()]
        for result_file in sorted(run_dir.glob("tune/*/*/result.json"))
    ]


def _last_results(run_dir) -> list[dict]:
    return [trial[-1] for trial in _reports(run_dir)]


# doctune.search in a process that imported the standard platform module, torch and ray first, as a
# notebook has them, reading validation alone; prints the leaderboard it returned and the rounds its
# on_trial received
IN_PROCESS_SEARCH = """
import json, sys
import platform, torch, ray
standard = sys.modules["platform"]
import doctune
rounds = []
board = doctune.search(
    sys.argv[1], profile="smoke", run_dir=sys.argv[2], validation_only=True,
    on_trial=lambda trial, result: rounds.append(
        [trial, result["eval_round"], "objective" in result, result.get("chunk_size")]
    ),
)
print("API", json.dumps({
    "rows": [row.trial for row in board.rows], "best": board.best.trial, "trials": [r.trial for r in board.trials],
    "rounds": rounds, "standard_platform": sys.modules["platform"] is standard,
}))
"""


@pytest.mark.parametrize(
    ("spec", "recipes"),
    [
        ("deca_wordnet", {"deca"}),
        ("bregman_longformer", {"shuffled"}),
    ],
)
def test_each_recipes_gpu_sized_spec_runs_real_trials_under_the_smoke_profile(
    tmp_path, spec, recipes, installed_doctune, monkeypatch
):
    # one trial each (the smoke spec's own tests cover a search of several): the spec trains for real.
    # docsplit_long's smoke search runs on an autoscaling cluster (tests/cluster/test_autoscaling.py);
    # simde_bert, all_recipes and laser_minilm add no recipe or backbone to these and the Pareto
    # search below (docsplit on MiniLM is the smoke spec's, LA(SER)^3 on MiniLM quality_vs_length's);
    # every shipped spec is validated under every profile in tests/platform/test_spec.py.
    # deca_wordnet's winner is confirmed with one more training seed (search.confirm_seeds).
    confirm = {"search.confirm_seeds": 1} if spec == "deca_wordnet" else {}
    # bregman_longformer's search is tracked by an MLflow server that does not answer: one warning, nothing lost
    dead_server = {"tracking.mlflow": {"tracking_uri": f"http://127.0.0.1:{closed_port()}"}}
    tracked = dead_server if spec == "bregman_longformer" else {}
    # one scoring round and one worker: the rounds and data parallelism are the smoke spec's to test
    changes = {
        "search.samples": 1,
        "train.eval_every": 4,
        "train.workers": 1,
        "evaluation.limits": FEW_ITEMS,
        **confirm,
        **tracked,
    }
    if spec == "bregman_longformer":  # with the Bregman term, the docs' example recipe (docs/plugins.md), one
        # hard negative a pair (mined by the installed wheel, made by the plug-in recipe) and the anchor term,
        # through GradCache
        changes |= {
            "recipe": "shuffled",
            "hyperparameters.shuffled_share": 0.7,
            "hyperparameters.hard_negatives": 1,
            "hyperparameters.anchor_weight": 1.0,
        }
    variant = spec_variant(spec, tmp_path, **changes)
    run_dir = tmp_path / "run"
    ledger = tmp_path / "readings.jsonl"  # the test's own ledger of locked-part readings
    monkeypatch.setenv(READINGS_ENV, str(ledger))
    if spec == "bregman_longformer":  # from Python, the installed wheel's (tests/test_install.py), outside the checkout
        # the example recipe comes from a package of its own, installed beside doctune: its entry point
        # in doctune.recipes is all doctune (and each Ray worker) needs to find it
        code = documented_plugins()["trainers/pairs/shuffled.py"]
        project = plugin_package(tmp_path, "shuffled_recipe", "doctune.recipes", code)
        pip = [installed_doctune / "python", "-m", "pip", "--disable-pip-version-check", "-q"]
        installed = outside_the_checkout([*pip, "install", "--no-deps", "--no-build-isolation", project], tmp_path)
        assert installed.returncode == 0, installed.stderr[-3000:]
        command = [installed_doctune / "python", "-c", IN_PROCESS_SEARCH, str(variant), str(run_dir)]
        try:
            done = outside_the_checkout(command, tmp_path, timeout=900)
        finally:
            outside_the_checkout([*pip, "uninstall", "-y", "doctune-shuffled-recipe"], tmp_path)
    else:  # DECA's with -v: the libraries' own output as well as doctune's
        done = run_smoke_search(variant, run_dir, *(["-v"] if spec == "deca_wordnet" else []))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    if spec == "deca_wordnet":  # Ray Train's round lines, Tune's status table, doctune's own rounds
        console = done.stdout + done.stderr
        assert "Reporting training result" in console and "Trial status:" in console
        assert re.search(r"\] step \d+/4 loss", console)
    if spec == "bregman_longformer":  # the rows returned, each round handed over, the standard module in place
        (line,) = [line for line in done.stdout.splitlines() if line.startswith("API ")]
        called = json.loads(line.removeprefix("API "))
        board = json.loads((run_dir / "leaderboard.json").read_text())["rows"]
        assert called["rows"] == [r["trial"] for r in board] and called["standard_platform"]
        assert called["trials"] == [called["best"]] == [r["trial"] for r in trial_rows(board)]
        # one trial, one round, with GradCache's chunk as measured (chunk_size: auto)
        ((trial, eval_round, scored, chunk_size),) = called["rounds"]
        assert [trial, eval_round, scored] == [trial_rows(board)[0]["trial"], 1, True] and chunk_size >= 1
        # with logging at WARNING (the caller configured none), nothing but doctune's warnings: no progress
        # of its own, nothing forwarded from Ray's workers, nothing of Ray's, Tune's or Optuna's
        assert done.stdout.splitlines() == [line], done.stdout[-3000:]
        warned = [text for text in done.stderr.splitlines() if text.strip()]
        foreign = [text for text in warned if not text.startswith(("doctune: warning: ", "  "))]  # "  ": a table's rows
        assert not foreign and any("warning: MLflow tracking at" in text for text in warned), done.stderr[-3000:]
    search = json.loads((run_dir / "search.json").read_text())
    assert search["profile"] == "smoke" and search["trial_plan"]["steps"] == 4
    rows = json.loads((run_dir / "leaderboard.json").read_text())["rows"]
    converted = search["resolved_spec"]["backbone"]["longformer"] is not None
    # the base as given, and the converted base (untrained) where the spec converts it
    baselines = {r["trial"]: r for r in rows if r["trial"].startswith("baseline")}
    assert set(baselines) == ({"baseline", "baseline-converted"} if converted else {"baseline"})
    assert len(rows) == len(baselines) + 1 and all(math.isfinite(r["objective"]) for r in rows)
    if converted:
        assert baselines["baseline"]["checkpoint"] != baselines["baseline-converted"]["checkpoint"]
        assert "longformer" in baselines["baseline-converted"]["checkpoint"]
    trials = trial_rows(rows)
    assert {r["status"] for r in trials} == {"completed"}
    assert {r["hyperparameters"]["recipe"] for r in trials} <= recipes
    if spec == "bregman_longformer":  # the recipe read its own setting; the pairs it made trained, with their
        # hard negatives, from the corpus's neighbours mined before the trial (a row for each corpus row)
        assert {r["hyperparameters"]["shuffled_share"] for r in trials} == {0.7}
        assert {r["hyperparameters"]["hard_negatives"] for r in trials} == {1}
        mined = np.load(Path(search["mined_neighbours"]) / "neighbours.npy")
        assert mined.shape[0] == search["corpus"]["documents"] + search["corpus"]["dropped_empty"]
        steps = [
            s for r in _last_results(run_dir) for s in json.loads((Path(r["checkpoint"]) / "steps.json").read_text())
        ]
        assert steps and all(-1.0 <= s["hard_negative_cosine"] <= 1.0 for s in steps)
        # and the anchor term, against the start's embeddings of short pretraining texts embedded before
        assert all(0.0 <= s["anchor_loss"] <= 4.0 for s in steps)
        assert (Path(search["anchor_targets"]) / "mean.npy").is_file()
    else:  # no trial takes hard negatives or weights the anchor: nothing is mined or embedded for them
        assert search["mined_neighbours"] is None and search["anchor_targets"] is None
    if tracked:
        assert done.stderr.count("warning: MLflow tracking at") == 1 and "the search goes on" in done.stderr
    if spec == "bregman_longformer":  # validation_only: no locked part read, nothing entered, no test verdict
        assert not ledger.exists() and not any("test" in parts for r in rows for parts in r["scores"].values())
        assert not trials[0]["locked_reading"] and not trials[0]["gains"] and trials[0]["test_objective"] is None
    else:  # the search's end and its confirmation seed: two readings entered, each verdict the first's
        (search_end, confirmation_seed) = read_ledger()
        assert "winner" in search_end.what and confirmation_seed.what.endswith("confirmation seed 1")
        assert trials[0]["locked_reading"]["before"] == 0
        verdicts = [line for line in done.stdout.splitlines() if " on test" in line]
        assert verdicts and all(line.endswith("[the locked part's first reading on this cache]") for line in verdicts)
    if confirm:  # the winner's configuration again with train.seed + 1; the winner's own run apart
        confirmation = trials[0]["confirmation"]
        assert set(confirmation["seeds"]) == {"1"} and confirmation["failed"] == 0
        assert confirmation["winner"]["seed"] == 0 and confirmation["winner"]["trial"] == trials[0]["trial"]
        assert confirmation["winner"]["test_objective"] == trials[0]["test_objective"]
        stats, new = confirmation["test_objective"], confirmation["seeds"]["1"]
        assert stats["n"] == 1 and stats["mean"] == pytest.approx(new["test_objective"])
        assert new["trial"] != trials[0]["trial"]
        card = (run_dir / "best" / "README.md").read_text()
        assert "This configuration retrained with 1 new training seed: test objective" in card
    for result in _last_results(run_dir):
        assert math.isfinite(result["loss"]) and result["tokens_per_s"] > 0
        if result["config"].get("bregman_k") or spec == "bregman_longformer":
            assert math.isfinite(result["bregman_loss"]) and result["active_subnetworks"] >= 1


def test_two_objectives_give_a_pareto_front_from_warm_started_trials(tmp_path):
    import optuna

    from platform.strategies.optuna_base import optuna_storage

    run_dir = tmp_path / "run"
    # one worker per trial: the two trials fit the machine at once (each trial's start-up overlaps the
    # other's); one scoring round: the rounds are the smoke spec's (and PBT's) to test
    changes = {"train.workers": 1, "train.eval_every": 4, "evaluation.limits": FEW_ITEMS}
    variant = spec_variant("quality_vs_length", tmp_path, **changes)
    done = run_smoke_search(variant, run_dir)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = json.loads((run_dir / "leaderboard.json").read_text())["rows"]
    trials = [r for r in rows if r["trial"] != "baseline"]
    assert len(trials) == 2 and all(set(r["objectives"]) == {"quality", "robustness"} for r in rows)
    for row in trials:  # on the front exactly when no other trial dominates it
        others = [o["objectives"] for o in trials if o is not row]
        mine = row["objectives"]
        dominated = any(all(o[k] >= mine[k] for k in mine) and any(o[k] > mine[k] for k in mine) for o in others)
        assert row["pareto"] == (not dominated)
    assert any(r["pareto"] for r in trials) and "front" in done.stdout
    # the report-only task scored the baseline and the top trials (the winner alone on its test part),
    # and steered nothing: each objective is the weighted mean of its own tasks' validation scores,
    # r8-clustering's in none
    winner = max(trials, key=lambda r: r["objective"])
    for row in rows:
        parts = ("val", "test") if row is winner or row["trial"] == "baseline" else ("val",)
        assert set(parts) == set(row["scores"]["r8-clustering"]) & {"val", "test"}, row["trial"]
        assert all(0 < row["scores"]["r8-clustering"][p]["nmi"] <= 1 for p in parts)
    named = json.loads((run_dir / "search.json").read_text())["resolved_spec"]["search"]["objective"]["objectives"]
    assert all("r8-clustering" not in weights for weights in named.values())
    for row in rows:
        for name, weights in named.items():
            value = sum(w * row["scores"][t]["val"]["main"] for t, w in weights.items()) / sum(weights.values())
            assert row["objectives"][name] == pytest.approx(value)
    # the warm-start points (each paper's defaults) ran first, as written in the spec
    assert sorted(r["hyperparameters"]["recipe"] for r in trials) == ["docsplit", "laser"]
    laser = next(r for r in trials if r["hyperparameters"]["recipe"] == "laser")["hyperparameters"]
    assert (laser["laser_mode"], laser["elongation_max"], laser["lr"]) == ("self", 256, 3e-5)
    # the Optuna study is in the run dir, for optuna-dashboard, with both objectives told
    study = optuna.load_study(study_name="quality_vs_length", storage=optuna_storage(run_dir))
    assert len(study.directions) == 2 and len(study.trials) == 2
    assert sorted(t.values for t in study.trials) == sorted(
        [[r["objectives"]["quality"], r["objectives"]["robustness"]] for r in trials]
    )
    assert (run_dir / "plots" / "pareto_front.png").stat().st_size > 10_000
    timings = _check_timings(run_dir)  # a search run in one call: its baseline scoring is timed too
    assert timings["phases"]["baseline"] > 0
    assert [[r["step"] for r in trial] for trial in _reports(run_dir)] == [[4], [4]]
