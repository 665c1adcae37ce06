"""The run's copy at a storage URI (platform/storage.py), on a real S3-compatible server (moto)."""

from __future__ import annotations

import os

import pytest

from platform.common import UsageError
from platform.storage import RunMirror, RunStorage


def _run_dir(root):
    """A run directory's kinds of file: a checkpoint, a rewritten record, the embedding cache, a
    half-written checkpoint, a lock, and a link to a log outside the run (as W&B's offline runs hold)."""
    step = root / "trials" / "t1" / "checkpoints" / "step_000002"
    step.mkdir(parents=True)
    (step / "model.safetensors").write_bytes(b"w" * 1000)
    (step / "scores.json").write_text("{}")
    (root / "search.json").write_text('{"spec": "smoke"}')
    (root / "embeddings").mkdir()
    (root / "embeddings" / "abc.npz").write_bytes(b"cache")
    (root / "trials" / "t1" / "checkpoints" / "step_000004.partial").mkdir()
    (root / "trials" / "t1" / "checkpoints" / "step_000004.partial" / "model.safetensors").write_bytes(b"half")
    (root / "optuna.journal.lock").write_text("")
    service_log = root.parent / ".service" / "core-debug.log"
    service_log.parent.mkdir(exist_ok=True)
    service_log.write_text("a machine-wide log")
    (root / "wandb" / "logs").mkdir(parents=True)
    (root / "wandb" / "logs" / "debug-core.log").symlink_to(service_log)
    return root


def test_the_copy_follows_the_run_dir_and_a_fresh_directory_gets_it_back(s3, tmp_path):
    storage = RunStorage.open(s3.uri("runs", "copy-1"))
    assert not storage.holds_run()
    run_dir = _run_dir(tmp_path / "run")
    mirror = RunMirror(storage, run_dir)
    assert mirror.sync() == (3, 0)
    assert storage.holds_run()
    assert storage.listing() == {
        "search.json": 17,
        "trials/t1/checkpoints/step_000002/model.safetensors": 1000,
        "trials/t1/checkpoints/step_000002/scores.json": 2,
    }
    assert mirror.sync() == (0, 0)  # nothing changed, nothing sent
    (run_dir / "search.json").write_text('{"spec": "smoke", "more": 1}')
    os.utime(run_dir / "search.json", ns=(1, 1))  # a rewrite, whatever the clock's resolution
    (run_dir / "trials" / "t1" / "checkpoints" / "step_000002" / "scores.json").unlink()  # freed by retention
    assert mirror.sync() == (1, 1)
    fresh = tmp_path / "fresh"
    assert storage.pull(fresh) == 2
    assert (fresh / "search.json").read_text() == '{"spec": "smoke", "more": 1}'
    assert (fresh / "trials/t1/checkpoints/step_000002/model.safetensors").read_bytes() == b"w" * 1000
    assert not (fresh / "embeddings").exists()


def test_a_mirror_of_a_fetched_run_sends_only_what_changed(s3, tmp_path):
    storage = RunStorage.open(s3.uri("runs", "copy-2"))
    RunMirror(storage, _run_dir(tmp_path / "run")).sync()
    fresh = tmp_path / "fresh"
    storage.pull(fresh)
    # a resumed search's first sync: the checkpoint's files are whole in the copy; the records go again
    assert RunMirror(storage, fresh).sync() == (1, 0)


def test_a_bad_storage_uri_is_one_message(s3):
    with pytest.raises(UsageError, match=r"--storage nope://x: .*give a bucket or directory URI"):
        RunStorage.open("nope://x")
    with pytest.raises(UsageError, match=r"writing failed .*check that the bucket exists"):
        RunStorage.open(s3.uri("no-such-bucket", "run"))


def _recorded(run_dir, profile: str = "smoke"):
    """``run_dir``'s search.json as a search of the shipped smoke spec at ``profile`` records it."""
    import dataclasses
    import json

    from platform.spec import find_spec_file, parse_spec, read_raw

    spec = parse_spec(read_raw(find_spec_file("smoke")), profile)
    record = {"spec": "smoke", "profile": profile, "resolved_spec": dataclasses.asdict(spec)}
    (run_dir / "search.json").write_text(json.dumps(record, default=str))
    return run_dir


def test_a_resume_fetches_the_copy_once_the_spec_matches_it(s3, tmp_path):
    from platform.resolution import SearchRequest

    uri = s3.uri("runs", "copy-3")
    RunMirror(RunStorage.open(uri), _recorded(_run_dir(tmp_path / "run"))).sync()
    # another profile than the run's: refused from the copy's search.json alone, nothing fetched
    with pytest.raises(UsageError, match="the spec or profile differs"):
        SearchRequest.from_command_line("smoke", "local", tmp_path / "fresh", True, uri)
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == ["run"]
    fresh = tmp_path / "fresh"
    request = SearchRequest.from_command_line("smoke", "smoke", fresh, True, uri)
    assert request.recorded["profile"] == "smoke" and request.storage.uri == uri
    assert (fresh / "trials/t1/checkpoints/step_000002/model.safetensors").stat().st_size == 1000
    with pytest.raises(UsageError, match=r"neither .* holds a search"):
        SearchRequest.from_command_line("smoke", "smoke", tmp_path / "other", True, s3.uri("runs", "empty"))


def test_a_retried_command_starts_the_search_once_and_resumes_it_after(s3, tmp_path):
    """``--resume-if-started``, the command a RayJob or a requeued Slurm job runs again as it is."""
    from platform.resolution import SearchRequest
    from platform.search import parse_args

    args = parse_args(["smoke", "--resume-if-started", "--run-dir", str(tmp_path / "run")])
    assert args.resume_if_started and not args.resume
    with pytest.raises(SystemExit):  # one or the other
        parse_args(["smoke", "--resume", "--resume-if-started"])
    fresh = SearchRequest.from_command_line("smoke", "smoke", tmp_path / "run", False, resume_if_started=True)
    assert not fresh.resume
    started = SearchRequest.from_command_line(
        "smoke", "smoke", _recorded(_run_dir(tmp_path / "run")), False, resume_if_started=True
    )
    assert started.resume and started.recorded["profile"] == "smoke"
    # on a fresh node, from the copy alone
    uri = s3.uri("runs", "copy-5")
    RunMirror(RunStorage.open(uri), tmp_path / "run").sync()
    elsewhere = SearchRequest.from_command_line(
        "smoke", "smoke", tmp_path / "node2", False, uri, resume_if_started=True
    )
    assert elsewhere.resume and (tmp_path / "node2" / "search.json").exists()


def test_the_copy_never_writes_over_what_is_not_this_runs(s3, tmp_path):
    from platform.resolution import SearchRequest

    uri = s3.uri("runs", "copy-4")
    RunMirror(RunStorage.open(uri), _recorded(_run_dir(tmp_path / "run"))).sync()
    with pytest.raises(UsageError, match=r"already holds a search .*continue that search with --resume"):
        SearchRequest.from_command_line("smoke", "smoke", tmp_path / "new", False, uri)
    other = s3.uri("runs", "not-a-run")
    RunStorage.open(other).upload(tmp_path / "run" / "search.json", "notes/keep.json")
    with pytest.raises(UsageError, match=r"already holds 1 file\(s\)"):
        SearchRequest.from_command_line("smoke", "smoke", tmp_path / "new", False, other)
    assert not (tmp_path / "new").exists()
    # a resumed run against a copy of another run (another search.json)
    _recorded(_run_dir(tmp_path / "second"), profile="local")
    with pytest.raises(UsageError, match="holds something other than the copy of"):
        SearchRequest.from_command_line("smoke", "local", tmp_path / "second", True, uri)
    # on one disk, the copy and the run directory may not contain each other
    with pytest.raises(UsageError, match="overlap"):
        SearchRequest.from_command_line("smoke", "smoke", tmp_path / "copies" / "run", False, str(tmp_path / "copies"))
    with pytest.raises(UsageError, match="credentials in the URI"):
        RunStorage.open("s3://key:secret@runs/run")


def test_the_search_command_refuses_a_bad_storage_uri_before_anything_starts(tmp_path):
    import subprocess

    from tests.conftest import ROOT, smoke_search_command

    command = [*smoke_search_command("smoke", tmp_path / "run"), "--storage", "nope://bucket/run"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "doctune: error: --storage nope://bucket/run: Unrecognized filesystem type in URI: nope://bucket/run; give "
        "a bucket or directory URI pyarrow opens: s3://bucket/prefix (an S3-compatible server: "
        "s3://bucket/prefix?endpoint_override=HOST:PORT&scheme=http), gs://bucket/prefix, or a path"
    ]
    assert not (tmp_path / "run").exists()


def test_an_export_from_a_uri_refuses_bad_input_in_terms_of_the_uri(s3, tmp_path, capsys):
    from platform.export.cli import main as export_main

    uri = s3.uri("runs", "copy-5")
    RunMirror(RunStorage.open(uri), _recorded(_run_dir(tmp_path / "run"))).sync()
    assert export_main([uri, "--to", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"doctune: error: {uri} holds no leaderboard.json: its search has not finished; finish it with its search "
        f"command and --resume --storage {uri}\n"
    )
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "mine.txt").write_text("mine")
    assert export_main([uri, "--to", str(tmp_path / "taken")]) == 2
    assert "exists and is not an empty directory" in capsys.readouterr().err
    assert export_main([s3.uri("runs", "empty"), "--to", str(tmp_path / "out")]) == 2
    assert "holds no search.json: not the storage copy of a doctune run" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
