"""How the search driver finds its Ray (a record of a Ray that is gone must not make it wait)."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml

from platform.cluster.ray_cluster import WORKERS_START_TIMEOUT_S, recorded_address_if_alive
from tests.conftest import ROOT

# a bound on a failure, not a speed: scripts/test.sh runs this module's Ray tests (marker own_ray)
# at a low priority beside the tests that run searches
FAILURE_BOUND_S = 360


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _record(temp_dir: Path, address: str) -> None:
    temp_dir.mkdir(parents=True, exist_ok=True)
    (temp_dir / "ray_current_cluster").write_text(address)


def test_no_record_and_a_live_record_leave_the_lookup_to_ray(tmp_path):
    assert recorded_address_if_alive(str(tmp_path)) is None
    with socket.socket() as gcs:
        gcs.bind(("127.0.0.1", 0))
        gcs.listen()
        _record(tmp_path, f"127.0.0.1:{gcs.getsockname()[1]}")
        assert recorded_address_if_alive(str(tmp_path)) is None


def test_a_record_nothing_answers_at_starts_a_local_ray_and_says_why(tmp_path, capsys):
    _record(tmp_path, f"127.0.0.1:{_closed_port()}")
    assert recorded_address_if_alive(str(tmp_path)) == "local"
    note = capsys.readouterr().err
    assert "no Ray answers at 127.0.0.1:" in note and str(tmp_path / "ray_current_cluster") in note
    assert not (tmp_path / "ray_current_cluster").exists()  # as `ray stop` would have left it


@pytest.mark.ray  # starts Ray
@pytest.mark.own_ray  # its own, at RAY_ADDRESS=local
def test_the_driver_starts_its_own_ray_beside_a_stale_record():
    # Ray's temp dir follows TMPDIR; a short one keeps its socket paths under the 107-byte limit
    with tempfile.TemporaryDirectory(dir="/tmp", prefix="r") as short:
        _record(Path(short) / "ray", f"127.0.0.1:{_closed_port()}")
        env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"} | {"TMPDIR": short}
        probe = (
            "from platform.cluster.ray_cluster import ray_init; import ray; "
            "print(ray_init(None)['CPU']); ray.shutdown()"
        )
        done = subprocess.run(
            [sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True, timeout=FAILURE_BOUND_S
        )
        left = (Path(short) / "ray" / "ray_current_cluster").exists()
    assert done.returncode == 0, done.stderr[-2000:]
    assert float(done.stdout.split()[-1]) > 0 and not left
    assert "starting a local Ray" in done.stderr


@pytest.mark.ray  # starts Ray
@pytest.mark.own_ray  # its own, at RAY_ADDRESS=local
def test_a_resumed_search_lets_restored_trials_wait_for_workers():
    """Tune restarts every unfinished trial of a restored experiment at once (and PBT every trial it
    paused); the driver gives their Ray Train worker groups time to wait for the trials ahead
    instead of erroring after 60 s. Read off a real Ray's workers, resumed and not."""
    probe = (
        "import os, sys, ray\n"
        "from platform.cluster.ray_cluster import ray_init\n"
        "ray_init(None, trials_may_wait=sys.argv[1] == 'resume')\n"
        "name = 'RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S'\n"
        "print(ray.get(ray.remote(lambda: os.environ.get(name, 'unset')).remote()))\n"
        "ray.shutdown()\n"
    )
    env = {**os.environ, "RAY_ADDRESS": "local"}
    seen = {}
    for mode in ("resume", "new"):
        done = subprocess.run(
            [sys.executable, "-c", probe, mode],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=FAILURE_BOUND_S,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        seen[mode] = done.stdout.split()[-1]

    assert seen == {"resume": WORKERS_START_TIMEOUT_S, "new": "unset"}


WORKERS_ASK_THEIR_CLUSTER = """
import ray
from ray._private.services import find_gcs_addresses
from ray.util.state import get_actor

from platform.cluster.ray_cluster import ray_init

ray_init(None)


@ray.remote(num_cpus=0)
class Asker:
    def alive(self) -> str:  # as Ray Train's placement-group cleaner asks about its controller
        return str(get_actor(ray.get_runtime_context().get_actor_id()).state)

    def through_another(self) -> str:
        return ray.get(Asker.remote().alive.remote())


asker = Asker.remote()
print(len(find_gcs_addresses()), ray.get(asker.alive.remote()), ray.get(asker.through_another.remote()))
ray.shutdown()
"""


@pytest.mark.ray  # starts two Rays
@pytest.mark.own_ray  # both its own, at RAY_ADDRESS=local
def test_workers_ask_their_own_cluster_with_another_ray_on_the_host():
    """Ray's state API called inside a worker without an address (Ray Train's placement-group
    cleaner does) finds the worker's own cluster with a second Ray on the host
    (``doctune_core.nodes.pin_ray_address``); left to itself it finds two GCS processes and fails."""
    env = {**os.environ, "RAY_ADDRESS": "local"}
    other = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import ray, sys; ray.init(num_cpus=0, include_dashboard=False); print('up', flush=True); sys.stdin.read()",
        ],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert other.stdout.readline().strip() == "up"
        done = subprocess.run(
            [sys.executable, "-c", WORKERS_ASK_THEIR_CLUSTER],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=FAILURE_BOUND_S,
        )
    finally:
        other.communicate(input="", timeout=FAILURE_BOUND_S)
    assert done.returncode == 0, done.stderr[-2000:]
    gcs_count, alive, through_another = done.stdout.split()[-3:]
    assert int(gcs_count) >= 2 and alive == through_another == "ALIVE"


def _search(*args: str):
    """The CLI's result, and whether it started a Ray. The command gets a Ray temporary directory of
    its own, where a Ray it starts leaves a session directory; a Ray another test starts meanwhile
    (the slow tier runs beside this one) leaves its session elsewhere."""
    with tempfile.TemporaryDirectory(prefix="ray", ignore_cleanup_errors=True) as ray_tmp:
        env = {**os.environ, "RAY_ADDRESS": "local", "RAY_TMPDIR": ray_tmp}
        done = subprocess.run(
            [sys.executable, "-m", "platform.search", *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=FAILURE_BOUND_S,
            env=env,
        )
        return done, any(Path(ray_tmp).glob("ray/session_2*"))


def test_resources_this_machine_lacks_are_refused_before_ray_starts(tmp_path):
    # docsplit_long's full profile: 4 workers x 4 CPUs and a GPU each, far beyond this machine
    done, started_ray = _search("docsplit_long", "--profile", "full", "--run-dir", str(tmp_path / "run"))
    assert done.returncode == 2 and done.stderr.startswith("doctune: error: one trial needs")
    assert not started_ray and not (tmp_path / "run").exists()


@pytest.mark.ray  # preparing the corpus starts Ray
@pytest.mark.own_ray  # its own, at RAY_ADDRESS=local
def test_docsplit_longs_dry_run_shows_the_six_dimensions(tmp_path):
    done, _ = _search("docsplit_long", "--profile", "local", "--run-dir", str(tmp_path / "run"), "--dry-run")
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(done.stdout[done.stdout.index("{") :])
    space = summary["resolved_spec"]["search"]["space"]
    assert (
        list(summary["searched"])
        == list(space)
        == [
            "views",
            "split_probability",
            "elongation_max",
            "temperature",
            "mlm_weight",
            "bregman_k",
            "lr",
        ]
    )
    assert summary["searched"]["views"] == {"choice": ["dropout", "split", "split+elongation", "elongation", "word"]}
    # the spec's own base converted, trained at 512 tokens, long documents half the objective
    resolved = summary["resolved_spec"]
    assert resolved["base_model"] == "all-minilm-l6-v2" and resolved["base"] is None
    assert resolved["backbone"]["longformer"]["max_length"] == 4096 and resolved["train"]["max_length"] >= 512
    weights = resolved["search"]["objective"]["tasks"]
    long_tasks = ("needle-retrieval", "passkey-retrieval", "news-passage-retrieval")
    assert sum(weights[t] for t in long_tasks) == sum(weights.values()) / 2
    # each task's scoring length and its documents' lengths, counted in the fixed tokenizer
    assert re.search(
        r"^doctune: task news-title-retrieval: scored at 256 tokens; 200 documents, median \d", done.stdout, re.M
    )
    assert re.search(r"^doctune: task r8-fewshot: scored at 256 tokens; \d+ documents", done.stdout, re.M)
    for task in long_tasks:
        assert re.search(
            rf"^doctune: long-document task {task}: scored at 2,048 tokens; \d+ documents", done.stdout, re.M
        )
    # a round scores the longest haystacks; the grid of every length is scored once, at the end
    assert re.search(
        r"^doctune: long-document task needle-retrieval: scored at 2,048 tokens; 120 documents", done.stdout, re.M
    )
    assert re.search(r"^doctune: long-document task needle-retrieval@grid: .*; 480 documents", done.stdout, re.M)
    assert space["split_probability"]["when"] == [["views", ["split", "split+elongation"]]]
    assert space["elongation_max"]["when"] == [["views", ["split+elongation", "elongation"]]]
    # the long study's validation-best setting first, then DocSplit's own
    assert summary["resolved_spec"]["search"]["warm_start"] == [
        {"views": "dropout", "temperature": 0.05, "mlm_weight": 0.0, "bregman_k": 0, "lr": 5e-5},
        {
            "views": "split",
            "split_probability": 0.5,
            "temperature": 0.05,
            "mlm_weight": 0.1,
            "bregman_k": 0,
            "lr": 5e-5,
        },
    ]
    assert not (tmp_path / "run").exists()


def test_a_resume_with_another_spec_is_refused_before_ray_starts(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    record = {"spec": "elsewhere.yaml", "profile": "smoke", "resolved_spec": {"name": "another search"}}
    (run_dir / "search.json").write_text(json.dumps(record))
    done, started_ray = _search("smoke", "--run-dir", str(run_dir), "--resume")
    assert done.returncode == 2 and "the spec or profile differs" in done.stderr
    assert not started_ray and sorted(p.name for p in run_dir.iterdir()) == ["search.json"]


@pytest.mark.ray  # starts Ray
@pytest.mark.own_ray  # its own, at RAY_ADDRESS=local
def test_a_profile_says_once_which_values_of_the_spec_it_replaced(tmp_path):
    spec = yaml.safe_load((ROOT / "search_spaces" / "smoke.yaml").read_text())
    spec["search"]["samples"] = 3  # the smoke profile makes it 2
    spec["train"]["steps"] = 6  # and this 4
    del spec["profiles"]
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(spec))
    done, _ = _search(str(path), "--profile", "smoke", "--run-dir", str(tmp_path / "run"), "--dry-run")
    assert done.returncode == 0, done.stderr[-2000:]
    line = "doctune: profile 'smoke' replaced values the spec sets: "
    assert done.stdout.count(line) == 1
    said = next(text for text in done.stdout.splitlines() if text.startswith(line))
    assert "train.steps 6 → 4" in said and "search.samples 3 → 2" in said and "keep yours with a profiles.smoke" in said
    summary = json.loads(done.stdout[done.stdout.index("{") :])  # --dry-run prints what search.json records
    assert {(r["key"], r["spec"], r["profile"]) for r in summary["profile_replaced"]} == {
        ("train.steps", 6, 4),
        ("search.samples", 3, 2),
    }


@pytest.mark.parametrize(
    ("content", "message"),
    [(bytes(range(256)) * 64, "is binary, not text"), (b"", "holds no non-empty document")],
)
def test_a_binary_or_empty_corpus_is_one_line_before_ray_starts(tmp_path, content, message):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_bytes(content)
    spec = yaml.safe_load((ROOT / "search_spaces" / "smoke.yaml").read_text())
    spec["corpus"] = {"source": str(corpus)}
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(spec))
    done, started_ray = _search(str(path), "--run-dir", str(tmp_path / "run"))
    assert done.returncode == 2 and done.stderr.startswith("doctune: error: corpus ") and message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not started_ray and not (tmp_path / "run").exists()
