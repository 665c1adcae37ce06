"""A run kept at a storage URI (platform/rundir/storage.py, platform/rundir/records.py), on a real S3-compatible
server (moto): the trials' and Tune's files are written there by them; the driver's records follow."""

from __future__ import annotations

import io
import os
import pickle
import re

import pytest

from platform.exit_codes import UsageError
from platform.rundir.records import RunRecords, UploadRecords
from platform.rundir.storage import RunStorage
from tests.conftest import recorded_search

TRIAL_FILE = "trials/t1/checkpoints/step_000002/model.safetensors"  # as a trial persists it, in the storage


def _run_dir(root):
    """A driver's run directory's kinds of file: records, the embedding cache, a half-written
    directory, a lock, and a link to a log outside the run (as W&B's offline runs hold)."""
    root.mkdir(parents=True)
    (root / "search.json").write_text('{"spec": "smoke"}')
    (root / "optuna.journal").write_text("{}\n")
    (root / "best").mkdir()
    (root / "best" / "model.safetensors").write_bytes(b"w" * 1000)
    (root / "embeddings").mkdir()
    (root / "embeddings" / "abc.npz").write_bytes(b"cache")
    (root / "best.partial").mkdir()
    (root / "best.partial" / "model.safetensors").write_bytes(b"half")
    (root / "optuna.journal.lock").write_text("")
    service_log = root.parent / ".service" / "core-debug.log"
    service_log.parent.mkdir(exist_ok=True)
    service_log.write_text("a machine-wide log")
    (root / "wandb" / "logs").mkdir(parents=True)
    (root / "wandb" / "logs" / "debug-core.log").symlink_to(service_log)
    return root


def test_the_driver_records_follow_the_run_dir_and_leave_the_trials_files_alone(s3, tmp_path):
    storage = RunStorage.open(s3.uri("runs", "kept-1"))
    assert not storage.holds_run()
    storage.write(TRIAL_FILE, io.BytesIO(b"t" * 10))
    run_dir = _run_dir(tmp_path / "run")
    records = RunRecords(storage, run_dir)
    assert records.sync() == (3, 0)
    assert storage.holds_run()
    assert storage.listing() == {
        "search.json": 17,
        "optuna.journal": 3,
        "best/model.safetensors": 1000,
        TRIAL_FILE: 10,  # not the driver's: never deleted, though the run directory has no trials/
    }
    assert records.sync() == (0, 0)  # nothing changed, nothing sent
    (run_dir / "optuna.journal").write_text("{}\n{}\n")
    os.utime(run_dir / "optuna.journal", ns=(1, 1))  # a rewrite, whatever the clock's resolution
    (run_dir / "best" / "model.safetensors").unlink()  # an export replaced
    assert records.sync() == (1, 1)
    # Tune's callback uploads the records a running search keeps (none outside one); it holds none
    # itself, so the one Tune saved with the experiment serves a resumed search's own
    callback = pickle.loads(pickle.dumps(UploadRecords()))
    (run_dir / "search.json").write_text('{"spec": "smoke", "more": 1}')
    callback.on_trial_complete(0, [], None)
    assert storage.read("search.json") == b'{"spec": "smoke"}'
    with records.kept_current():
        callback.on_trial_complete(0, [], None)
        assert storage.read("search.json") == b'{"spec": "smoke", "more": 1}'
    fresh = tmp_path / "fresh"
    assert storage.pull_driver_records(fresh) == 2
    assert (fresh / "optuna.journal").read_text() == "{}\n{}\n"
    assert not (fresh / "trials").exists() and not (fresh / "embeddings").exists()
    assert RunRecords(storage, fresh).sync() == (0, 0)  # a resumed search's records fetched: none sent again
    (fresh / "optuna.journal").write_text("{}\n{}\n{}\n")
    assert RunRecords(storage, fresh).sync() == (1, 0)


def test_a_bad_storage_uri_is_one_message(s3):
    with pytest.raises(UsageError, match=r"--storage nope://x: .*give a bucket or directory URI"):
        RunStorage.open("nope://x")
    with pytest.raises(UsageError, match=r"writing failed .*check that the bucket exists"):
        RunStorage.open(s3.uri("no-such-bucket", "run"))


def _kept(uri: str, run_dir, **recorded) -> RunStorage:
    """A run kept at ``uri``: a trial's checkpoint file there, the driver's records uploaded."""
    storage = RunStorage.open(uri)
    storage.write(TRIAL_FILE, io.BytesIO(b"t" * 10))
    RunRecords(storage, recorded_search(_run_dir(run_dir), storage=uri, **recorded)).sync()
    return storage


def test_a_resume_fetches_the_driver_records_once_the_spec_matches(s3, tmp_path):
    from platform.search_path.request import SearchRequest

    uri = s3.uri("runs", "kept-3")
    _kept(uri, tmp_path / "run")
    # another profile than the run's: refused from the storage's search.json alone, nothing fetched
    with pytest.raises(UsageError, match="the spec or profile differs"):
        SearchRequest.from_command_line("smoke", "local", tmp_path / "fresh", True, uri)
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == ["run"]
    fresh = tmp_path / "fresh"
    request = SearchRequest.from_command_line("smoke", "smoke", fresh, True, uri)
    assert request.recorded["profile"] == "smoke" and request.storage.uri == uri
    assert (fresh / "best" / "model.safetensors").stat().st_size == 1000
    assert not (fresh / "trials").exists()  # the trials go on from the storage
    with pytest.raises(UsageError, match=r"neither .* holds a search"):
        SearchRequest.from_command_line("smoke", "smoke", tmp_path / "other", True, s3.uri("runs", "empty"))


def test_a_resumed_run_stays_where_its_trials_are(s3, tmp_path):
    from platform.search_path.request import SearchRequest

    uri = s3.uri("runs", "kept-6")
    _kept(uri, tmp_path / "run")
    resumed = SearchRequest.from_command_line("smoke", "smoke", tmp_path / "run", True)  # no --storage: its own
    assert resumed.storage.uri == uri
    with pytest.raises(
        UsageError, match=rf"keeps its trials and Tune.s records in {re.escape(uri)}.*--storage {re.escape(uri)}"
    ):
        SearchRequest.from_command_line("smoke", "smoke", tmp_path / "run", True, s3.uri("runs", "kept-7"))
    local = recorded_search(tmp_path / "local")  # started without --storage: its trials are in its directory
    with pytest.raises(UsageError, match=r"in .*local, where its search started; resume it without --storage"):
        SearchRequest.from_command_line("smoke", "smoke", local, True, s3.uri("runs", "kept-7"))


def test_a_run_an_earlier_doctune_copied_goes_on_in_its_directory_alone(s3, tmp_path, capsys):
    from platform.search_path.request import SearchRequest

    uri = s3.uri("runs", "kept-8")
    _kept(uri, tmp_path / "run", earlier=True)
    for run_dir, storage in ((tmp_path / "run", uri), (tmp_path / "fresh", uri)):
        with pytest.raises(UsageError, match=r"the copy an earlier doctune kept .* without --storage"):
            SearchRequest.from_command_line("smoke", "smoke", run_dir, True, storage)
    assert not (tmp_path / "fresh").exists()
    request = SearchRequest.from_command_line("smoke", "smoke", tmp_path / "run", True)
    assert request.storage is None and "that copy is no longer updated" in capsys.readouterr().out


def test_a_retried_command_starts_the_search_once_and_resumes_it_after(s3, tmp_path):
    """``--resume-if-started``, the command a RayJob or a requeued Slurm job runs again as it is."""
    from platform.search import parse_args
    from platform.search_path.request import SearchRequest

    args = parse_args(["smoke", "--resume-if-started", "--run-dir", str(tmp_path / "run")])
    assert args.resume_if_started and not args.resume
    with pytest.raises(SystemExit):  # one or the other
        parse_args(["smoke", "--resume", "--resume-if-started"])
    fresh = SearchRequest.from_command_line("smoke", "smoke", tmp_path / "run", False, resume_if_started=True)
    assert not fresh.resume
    started = SearchRequest.from_command_line(
        "smoke", "smoke", recorded_search(tmp_path / "run"), False, resume_if_started=True
    )
    assert started.resume and started.recorded["profile"] == "smoke"
    # on a fresh node, from the storage alone
    uri = s3.uri("runs", "kept-5")
    _kept(uri, tmp_path / "kept")
    elsewhere = SearchRequest.from_command_line(
        "smoke", "smoke", tmp_path / "node2", False, uri, resume_if_started=True
    )
    assert elsewhere.resume and (tmp_path / "node2" / "search.json").exists()


def test_a_search_never_writes_over_what_is_not_its_own(s3, tmp_path):
    from platform.search_path.request import SearchRequest

    uri = s3.uri("runs", "kept-4")
    _kept(uri, tmp_path / "run")
    with pytest.raises(UsageError, match=r"already holds a search .*continue that search with --resume"):
        SearchRequest.from_command_line("smoke", "smoke", tmp_path / "new", False, uri)
    other = s3.uri("runs", "not-a-run")
    RunStorage.open(other).upload(tmp_path / "run" / "search.json", "notes/keep.json")
    with pytest.raises(UsageError, match=r"already holds 1 file\(s\)"):
        SearchRequest.from_command_line("smoke", "smoke", tmp_path / "new", False, other)
    assert not (tmp_path / "new").exists()
    # a resumed run against the storage of another run (another search.json)
    recorded_search(tmp_path / "second", profile="local", storage=uri)
    with pytest.raises(UsageError, match="holds something other than the run in"):
        SearchRequest.from_command_line("smoke", "local", tmp_path / "second", True, uri)
    # on one disk, the storage and the run directory may not contain each other
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

    uri = s3.uri("runs", "kept-9")
    _kept(uri, tmp_path / "run")
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
    assert "holds no search.json: no doctune run was kept there" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
