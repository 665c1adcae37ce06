"""`cluster_onprem.yaml` brought up for real: `ray up`, a smoke search as a Ray job, its run kept in a
bucket of the suite's S3 server (no shared file system, each node's cache its own), `ray down`.

The launcher's `local` provider reaches the "cluster" (this machine) over SSH: the test starts an
sshd bound to 127.0.0.1 that admits root by a throwaway key only, and the cluster runs as root
(the venv's interpreter may live where no other user can run it). `ray down` runs `ray stop`,
which kills every Ray process on the host, and the head takes Ray's default ports, so this test
runs alone, in its own CI step (`pytest -m onprem`, after the main suite); scripts/test.sh
installs openssh-server and rsync where they are absent. What the cluster's setup writes into
root's home (~/doctune, the PATH line in ~/.bashrc, the launcher's bootstrap files) is removed
afterwards; a copy a killed run left (its .venv a link) is replaced.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import psutil
import pytest
import yaml
from ray._private.utils import get_ray_address_file

from doctune_core.data import cache_dir
from doctune_core.encoder import embed_texts, load_encoder
from doctune_core.run_files import RunFiles
from tests.conftest import FEW_ITEMS, ROOT, spec_variant
from tests.servers import S3_ENVIRONMENT

pytestmark = [pytest.mark.onprem, pytest.mark.ray]

SSHD = Path("/usr/sbin/sshd")
VENV = Path(sys.executable).parent.parent
RAY = VENV / "bin" / "ray"
HOME = Path.home()
RAY_DAEMONS = ("gcs_server", "raylet", "dashboard.py", "log_monitor.py", "monitor.py", "ray::")


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def _processes_naming(*words: str) -> list[str]:
    found = []
    for process in psutil.process_iter(["pid", "cmdline"]):
        command = " ".join(process.info["cmdline"] or [])
        if any(word in command for word in words) and process.pid != os.getpid():
            found.append(f"{process.pid} {command[:120]}")
    return found


def _ray_processes() -> list[str]:
    return _processes_naming(*RAY_DAEMONS)


def _check_prerequisites() -> None:
    missing = [tool for tool in (str(SSHD), "rsync", "ssh", "ssh-keygen") if not shutil.which(tool)]
    if missing:
        pytest.fail(f"the on-prem cluster test needs {', '.join(missing)}: apt-get install openssh-server rsync")
    if os.geteuid() != 0:
        pytest.fail("the on-prem cluster test runs the cluster as root over SSH: run it as root")
    for port in (22, 6379, 8265):
        if _listening(port):
            pytest.fail(f"127.0.0.1:{port} is taken; the on-prem cluster test needs it free (run it alone)")
    deadline = time.monotonic() + 60  # a finished test run's Ray processes may take a moment to exit
    while (running := _ray_processes()) and time.monotonic() < deadline:
        time.sleep(1)
    if running:
        pytest.fail(f"Ray is running on this host and `ray down` would stop it; run this test alone: {running}")
    mount = HOME / "doctune"
    if mount.exists() and not _left_by_this_test(mount):
        pytest.fail(f"{mount} exists; the cluster's file mount would overwrite it")


def _left_by_this_test(mount: Path) -> bool:
    """Whether `mount` is what a killed run of this test left behind: only this fixture links the
    cluster's venv to an existing one; scripts/setup.sh always builds a real directory."""
    return (mount / ".venv").is_symlink()


@pytest.fixture
def sshd(tmp_path_factory):
    """An sshd on 127.0.0.1:22 that admits root by a throwaway key; root's home restored afterwards."""
    _check_prerequisites()
    keys = tmp_path_factory.mktemp("sshd")
    key = keys / "id_ed25519"
    for path in (key, keys / "host_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    config = keys / "sshd_config"
    config.write_text(
        "\n".join(
            [
                "ListenAddress 127.0.0.1",
                "Port 22",
                f"HostKey {keys / 'host_key'}",
                f"PidFile {keys / 'sshd.pid'}",
                f"AuthorizedKeysFile {key}.pub",
                "StrictModes no",  # the key file sits in a temporary directory, not ~/.ssh
                "AllowUsers root",
                "PermitRootLogin prohibit-password",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "UsePAM no",
                "",
            ]
        )
    )
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege-separation directory
    bashrc = HOME / ".bashrc"
    bashrc_before = bashrc.read_bytes() if bashrc.exists() else None
    bootstrap = [HOME / "ray_bootstrap_config.yaml", HOME / "ray_bootstrap_key.pem"]
    bootstrap_before = {path: path.exists() for path in bootstrap}
    token = HOME / ".ray" / "auth_token"  # the cluster's token: file_mounts copies it to every node
    token_before = token.exists()
    if not token_before:
        subprocess.run([str(RAY), "get-auth-token", "--generate"], check=True, capture_output=True, timeout=120)
    # The cluster's venv is this one: ~/doctune/.venv links to it, so setup.sh finds it current.
    # A copy a killed run left (CI stopped mid-test) is replaced.
    shutil.rmtree(HOME / "doctune", ignore_errors=True)
    (HOME / "doctune").mkdir()
    (HOME / "doctune" / ".venv").symlink_to(VENV)
    daemon = subprocess.Popen([str(SSHD), "-D", "-f", str(config)])
    try:
        deadline = time.monotonic() + 10
        while not _listening(22):
            assert daemon.poll() is None and time.monotonic() < deadline, "sshd did not start"
            time.sleep(0.1)
        yield key
    finally:
        sessions = psutil.Process(daemon.pid).children(recursive=True)
        daemon.terminate()
        daemon.wait(timeout=10)
        for session in sessions:  # a connection's sshd outlives the listener
            with contextlib.suppress(psutil.NoSuchProcess):
                session.kill()
        shutil.rmtree(HOME / "doctune")
        if not token_before:
            token.unlink(missing_ok=True)
        if bashrc_before is None:
            bashrc.unlink(missing_ok=True)
        else:
            bashrc.write_bytes(bashrc_before)
        for path, existed in bootstrap_before.items():
            if not existed:
                path.unlink(missing_ok=True)


def _outside_env() -> dict[str, str]:
    """The environment without the suite's RAY_ADDRESS=local: the launcher and the job client
    address the cluster this test brings up."""
    return {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}


def _launcher(*args: str, config: Path, timeout: float) -> subprocess.CompletedProcess:
    env = {**_outside_env(), "PATH": f"{VENV / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        [str(RAY), *args, str(config)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, f"ray {args[0]} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def _check_exported_winner(best: Path, leaderboard: list[dict]) -> None:
    """The search's winner, exported to best/, loads and embeds: doctune's own loader and, where the
    export wrote its module files, sentence-transformers, which must give the same vectors."""
    record = json.loads((best / "doctune.json").read_text())
    assert record["trial_id"] in {row["trial"] for row in leaderboard}
    texts = ["The central bank raised interest rates on Tuesday.", "A late goal settled the cup final."]
    model, tokenizer = load_encoder(str(best))
    ours = embed_texts(model, tokenizer, texts, pooling=record["pooling"], max_length=128)
    assert ours.shape == (2, model.config.hidden_size) and np.isfinite(ours).all()
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    assert float(ours[0] @ ours[1]) < 0.99  # two unrelated texts: two different vectors
    if (best / "modules.json").exists():
        from sentence_transformers import SentenceTransformer

        theirs = SentenceTransformer(str(best), device="cpu").encode(texts, convert_to_numpy=True)
        np.testing.assert_allclose(theirs, ours, atol=1e-5)


def test_ray_up_runs_a_smoke_search_job_and_ray_down_leaves_nothing(sshd, s3, tmp_path):
    text = (ROOT / "cluster_onprem.yaml").read_text()
    assert "DOCTUNE_CACHE" not in text and "/srv/" not in text  # no shared export: each node's cache its own
    config = yaml.safe_load(text)
    config["provider"] |= {"head_ip": "127.0.0.1", "worker_ips": []}
    config["auth"] = {"ssh_user": "root", "ssh_private_key": str(sshd)}
    config["file_mounts"]["~/doctune"] = str(ROOT)  # the token's mount stays: it is this host's own file
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump(config, sort_keys=False))
    run_dir = tmp_path / "runs" / "smoke"
    try:
        _launcher("up", "-y", "--disable-usage-stats", "--no-config-cache", config=cluster, timeout=300)
        assert _listening(8265), "the head's dashboard / job API is not on 127.0.0.1:8265"

        submit_to = ["--address", "http://127.0.0.1:8265", "--working-dir", str(ROOT), "--submission-id", "smoke"]
        # one trial on few items: what is tested is the cluster's life cycle and the job, not the search
        spec = spec_variant("smoke", tmp_path, **{"search.samples": 1, "evaluation.limits": FEW_ITEMS})
        storage = s3.uri("runs", "onprem-smoke")
        search = ["python", "-m", "platform.search", spec, "--profile", "smoke", "--storage", storage]
        # the bucket's credentials, given to every node by the job's runtime environment
        credentials = ["--runtime-env-json", json.dumps({"env_vars": S3_ENVIRONMENT})]
        # Every node started Ray in token mode with ~/.ray/auth_token, which a client of the same
        # user and host reads once told to use token auth.
        submit = subprocess.run(
            [str(RAY), "job", "submit", *submit_to, *credentials, "--", *search, "--run-dir", str(run_dir)],
            env={**_outside_env(), "RAY_AUTH_MODE": "token"},
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert submit.returncode == 0, f"the job failed:\n{submit.stdout[-4000:]}\n{submit.stderr[-2000:]}"
        assert "Job 'smoke' succeeded" in submit.stdout + submit.stderr

        leaderboard = json.loads((run_dir / "leaderboard.json").read_text())["rows"]
        trials = [row for row in leaderboard if row["trial"] != "baseline"]
        assert len(trials) == 1 and all(row["status"] == "completed" for row in trials)
        assert all(row["objective"] is not None for row in trials)
        _check_exported_winner(run_dir / "best", leaderboard)
        prepared = json.loads((run_dir / "search.json").read_text())["prepared_corpus"]
        assert prepared.startswith(str(cache_dir()) + "/corpora/"), prepared  # the node's own cache
        kept = RunFiles.at(storage)  # the run in the bucket: its records and the trial's checkpoints
        assert kept.is_file("leaderboard.json") and kept.is_file("search.json") and kept.children("trials")
    finally:
        _launcher("down", "-y", config=cluster, timeout=300)

    # Ray's processes, and the launcher's SSH control connections once their 10 s linger is over
    deadline = time.monotonic() + 30
    while (left := _ray_processes() + _processes_naming(str(sshd))) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not left, f"processes left after `ray down`: {left}"
    assert not _listening(8265) and not _listening(6379)
    assert not Path(get_ray_address_file(None)).exists(), "`ray down` left the head's address record"
