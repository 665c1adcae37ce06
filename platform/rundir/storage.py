"""A run kept at a storage URI (``--storage``): a bucket, or a directory elsewhere, that every node reaches.

``python -m platform.search SPEC --storage s3://bucket/runs/name`` makes the URI the run's files
(``doctune_core.run_files``): each trial persists its checkpoints there and reads and writes its records
there (``trials/``), Ray Tune keeps its experiment there (``tune/``), and the driver keeps its own
records in its run directory and uploads them as they change (``platform.rundir.records``: ``search.json``,
the Optuna journal, the baselines, the leaderboard, the report, ``best/``, the timings). So the
nodes of a cluster share nothing but the bucket.

From the URI alone a fresh machine continues the search (``--resume --storage URI`` with a run
directory that does not exist yet: the driver's records are fetched first), exports a trial
(``python -m platform.export URI --to DIR``) or writes the run's report (``python -m
platform.report URI --to DIR``). Any file system pyarrow opens by URI works: ``s3://`` (with
``?endpoint_override=HOST:PORT&scheme=http`` for an S3-compatible server), ``gs://``, ``hdfs://``,
``file://`` or a plain path. Credentials come from the environment, as pyarrow reads them.
docs/decisions/run-storage.md says what goes where.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from doctune_core.run_files import RunFiles
from doctune_core.run_layout import LEADERBOARD_FILE, OPTUNA_JOURNAL, SEARCH_RECORD, TIMINGS_FILE, TRIALS_DIR, TUNE_DIR
from platform.exit_codes import UsageError
from trainers.inputs import INPUTS

REPORT_RECORDS = (SEARCH_RECORD, LEADERBOARD_FILE, TIMINGS_FILE, OPTUNA_JOURNAL)
# top-level entries written in the storage by the trials, by Tune, and by the driver for the nodes (trainers.inputs)
WRITTEN_THERE = (TRIALS_DIR, TUNE_DIR, INPUTS)
LOCAL_ONLY = ("embeddings",)  # never uploaded: the embedding cache is rebuilt from checkpoints
URI_HELP = (
    "a bucket or directory URI pyarrow opens: s3://bucket/prefix (an S3-compatible server: "
    "s3://bucket/prefix?endpoint_override=HOST:PORT&scheme=http), gs://bucket/prefix, or a path"
)


def is_driver_record(relative: str) -> bool:
    """Whether a file of the run (a path relative to it) is one the driver keeps in its run directory
    and uploads (``platform.rundir.records``), rather than one the trials or Tune write in the storage, or
    one never uploaded (the embedding cache, half-written ``*.partial`` directories, lock files)."""
    parts = relative.split("/")
    return not (
        parts[0] in WRITTEN_THERE
        or parts[0] in LOCAL_ONLY
        or any(p.endswith(".partial") for p in parts)
        or parts[-1].endswith(".lock")
    )


def copied_by_an_earlier_doctune(recorded: dict) -> bool:
    """Whether a run's ``search.json`` is one whose ``--storage`` held a copy of its run directory, kept
    by an earlier doctune's copy loop (the run directory holds the whole run; the copy is not updated now)."""
    return bool(recorded.get("storage")) and "run_files" not in recorded


def refuse_earlier_copy(where: str, recorded: dict) -> UsageError:
    """The message for resuming, through ``--storage``, a run an earlier doctune copied there."""
    return UsageError(
        f"{where}: this run's --storage ({recorded['storage']}) is the copy an earlier doctune kept of its run "
        "directory, which this doctune does not update; resume the run directory itself without --storage "
        "(fetch the copy whole first where the directory is gone, for example: aws s3 sync URI DIR)"
    )


def run_files_of(run_dir: Path) -> RunFiles:
    """Where the run in ``run_dir`` keeps its trials and Tune's records: the storage its ``search.json``
    records (``--storage``), else the directory itself."""
    recorded = json.loads((run_dir / SEARCH_RECORD).read_text())
    return RunFiles.at(recorded.get("run_files") or run_dir)


class RunStorage(RunFiles):
    """A run's storage: its files (``doctune_core.run_files``), checked as a search or a reader opens it."""

    @classmethod
    def open(cls, uri: str, writable: bool = True) -> RunStorage:
        """The URI's file system, checked by a real write, or a read where only reading is needed
        (``UsageError`` naming what is wrong). A plain path is made absolute, as it is recorded."""
        import pyarrow

        if "://" in uri and "@" in uri.split("://", 1)[1].split("/", 1)[0]:
            raise UsageError(
                f"--storage: credentials in the URI would be recorded in {SEARCH_RECORD} and printed; give them "
                "through the environment (e.g. AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY) and the URI without them"
            )
        try:
            files = RunFiles.at(uri)
        except (pyarrow.ArrowInvalid, ValueError, OSError) as err:  # OSError: e.g. hdfs:// without a JVM
            raise UsageError(f"--storage {uri}: {str(err).splitlines()[0]}; give {URI_HELP}") from None
        storage = cls(files.uri, files.filesystem, files.root)
        try:  # a missing bucket, bad credentials or an unreachable server show here, once
            if writable:
                probe = f"{storage.root}/.doctune-probe-{uuid.uuid4().hex}"
                storage.filesystem.create_dir(storage.root, recursive=True)
                with storage.filesystem.open_output_stream(probe) as out:
                    out.write(b"probe")
                storage.filesystem.delete_file(probe)
            else:
                storage.holds_run()
        except OSError as err:
            access = "writing" if writable else "reading"
            raise UsageError(
                f"--storage {uri}: {access} failed ({str(err).splitlines()[0]}); check that the bucket exists, "
                f"the credentials in the environment allow {access}, and the server is reachable"
            ) from None
        return storage

    @classmethod
    def open_run(cls, uri: str) -> RunStorage:
        """A search's copy at ``uri``, opened to read (``UsageError`` where the URI is bad or holds
        no run)."""
        storage = cls.open(uri, writable=False)
        if not storage.holds_run():
            raise UsageError(f"{uri} holds no {SEARCH_RECORD}: no doctune run was kept there (--storage)")
        return storage

    def check_holds(self, run_dir: Path, resume: bool) -> None:
        """Refuse (``UsageError``) a storage the search must not write in, before anything is written:
        a new search's URI must be empty, a resumed search's must hold this run (the same
        ``search.json``); and on this machine's disk, neither may lie inside the other."""
        import pyarrow.fs

        if isinstance(self.filesystem, pyarrow.fs.LocalFileSystem):
            here, there = run_dir.resolve(), Path(self.root)
            if here == there or there in here.parents or here in there.parents:
                raise UsageError(
                    f"--storage {self.uri} and the run directory {run_dir} overlap: the storage must lie outside "
                    "the run directory and hold nothing else; choose another --storage or --run-dir"
                )
        found = self.listing()
        if not found:
            return
        if not resume:
            what = f"a search (its {SEARCH_RECORD})" if SEARCH_RECORD in found else f"{len(found)} file(s)"
            raise UsageError(
                f"--storage {self.uri} already holds {what}: a new search's files go to an empty place "
                "(the search deletes there what it no longer keeps); continue that search with --resume, "
                "or choose another URI"
            )
        recorded = (run_dir / SEARCH_RECORD).read_bytes()
        if SEARCH_RECORD not in found or self.read(SEARCH_RECORD) != recorded:
            raise UsageError(
                f"--storage {self.uri} holds something other than the run in {run_dir} (its {SEARCH_RECORD} differs "
                "or is missing); choose the URI this run was started with"
            )

    def holds_run(self) -> bool:
        """Whether a search was started here (its ``search.json`` is in the storage)."""
        return self.is_file(SEARCH_RECORD)

    def upload(self, local: Path, relative: str) -> None:
        """One file into the storage, whole or not at all."""
        with local.open("rb") as source:
            self.write(relative, source)

    def pull_records(self, run_dir: Path) -> int:
        """Fetch what a run's report reads of the driver's records into ``run_dir`` (the leaderboard,
        the search's record and timings, the Optuna journal; Tune's logs are read in the storage);
        the count."""
        return self._download_all([f for f in self.listing() if f in REPORT_RECORDS], run_dir)

    def pull_driver_records(self, run_dir: Path) -> int:
        """Fetch the driver's records (``is_driver_record``) into ``run_dir``: what a search resumed on
        another machine needs beside what stays in the storage; the count."""
        return self._download_all([f for f in self.listing() if is_driver_record(f)], run_dir)

    def pull(self, run_dir: Path, under: tuple[str, ...]) -> int:
        """Fetch the files whose paths start with one of ``under`` into ``run_dir``, not those a write
        still has under a name of its own (``RunFiles.write``); the count."""
        wanted = [f for f in self.listing() if f.startswith(under) and not f.endswith(".partial")]
        return self._download_all(wanted, run_dir)

    def _download_all(self, files: list[str], run_dir: Path) -> int:
        for relative in files:
            self.download(relative, run_dir / relative)
        return len(files)
