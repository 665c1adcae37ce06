"""A run's durable copy at a storage URI (``--storage``): a bucket, or a directory elsewhere.

``python -m platform.search SPEC --storage s3://bucket/runs/name`` keeps the run directory as the
search's working copy (on the driver's node; shared by the nodes, as without ``--storage``) and
mirrors it to the URI while the search runs and once more when it ends: checkpoints and their scores,
Ray Tune's experiment and Ray Train's run state, the Optuna journal, ``baseline.json``, the
leaderboard, the report, ``best/`` and the timings. What the run directory frees (superseded training
state, ``train.keep_checkpoints``) is freed in the copy too. Only the embedding cache, half-written
``*.partial`` directories and lock files stay local: they are rebuilt or never read back. Symbolic
links are not followed: W&B links its service's shared log into each offline run, a file of the
machine that keeps growing after the run ends, not part of the run.

From the URI alone a fresh machine continues the search (``--resume --storage URI`` with a run
directory that does not exist yet: the copy is fetched first), exports a trial
(``python -m platform.export URI --to DIR``) or writes the run's report (``python -m
platform.report URI --to DIR``, from its records alone). Any file system pyarrow opens by URI works: ``s3://``
(with ``?endpoint_override=HOST:PORT&scheme=http`` for an S3-compatible server), ``gs://``,
``hdfs://``, ``file://`` or a plain path. Credentials come from the environment, as pyarrow reads
them. docs/decisions.md, "Run storage", says why a mirror and what it does not do.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from core.run_files import RunFiles
from platform.common import STUDY_FILE, UsageError

REPORT_RECORDS = ("search.json", "leaderboard.json", "timings.json", STUDY_FILE)
TUNE_LOGS = ("/result.json", "/progress.csv")  # each trial's rounds, as Tune logged them
LOCAL_ONLY = ("embeddings",)  # top-level entries never copied: the embedding cache is rebuilt from checkpoints
MIRROR_EVERY_S = 30.0  # while a search runs; a crash of the whole machine loses at most this much of the copy
URI_HELP = (
    "a bucket or directory URI pyarrow opens: s3://bucket/prefix (an S3-compatible server: "
    "s3://bucket/prefix?endpoint_override=HOST:PORT&scheme=http), gs://bucket/prefix, or a path"
)


def _stays_local(relative: str) -> bool:
    parts = relative.split("/")
    return parts[0] in LOCAL_ONLY or any(p.endswith(".partial") for p in parts) or parts[-1].endswith(".lock")


def _written_once(relative: str) -> bool:
    """A file inside a finished checkpoint (``trials/ID/checkpoints/step_N/...``): written whole, once,
    never changed, so a copy of the same size is the same file."""
    parts = relative.split("/")
    return len(parts) > 4 and parts[0] == "trials" and parts[2] == "checkpoints" and parts[3].startswith("step_")


class RunStorage(RunFiles):
    """A run's storage copy: its files (``core.run_files``), checked as a search or a reader opens it."""

    @classmethod
    def open(cls, uri: str, writable: bool = True) -> RunStorage:
        """The URI's file system, checked by a real write, or a read where only reading is needed
        (``UsageError`` naming what is wrong). A plain path is made absolute, as it is recorded."""
        import pyarrow

        if "://" in uri and "@" in uri.split("://", 1)[1].split("/", 1)[0]:
            raise UsageError(
                "--storage: credentials in the URI would be recorded in search.json and printed; give them "
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
            raise UsageError(f"{uri} holds no search.json: not the storage copy of a doctune run")
        return storage

    def check_holds(self, run_dir: Path, resume: bool) -> None:
        """Refuse (``UsageError``) a copy the mirror must not write over, before anything is written:
        a new search's URI must be empty, a resumed search's empty or this run's own copy (the same
        ``search.json``); and on this machine's disk, neither may lie inside the other."""
        import pyarrow.fs

        if isinstance(self.filesystem, pyarrow.fs.LocalFileSystem):
            here, there = run_dir.resolve(), Path(self.root)
            if here == there or there in here.parents or here in there.parents:
                raise UsageError(
                    f"--storage {self.uri} and the run directory {run_dir} overlap: the copy must lie outside "
                    "the run directory and hold nothing else; choose another --storage or --run-dir"
                )
        found = self.listing()
        if not found:
            return
        if not resume:
            what = "a search (its search.json)" if "search.json" in found else f"{len(found)} file(s)"
            raise UsageError(
                f"--storage {self.uri} already holds {what}: a new search's copy goes to an empty place "
                "(the copy is kept equal to the run directory, deleting what the run does not hold); "
                "continue that search with --resume, or choose another URI"
            )
        recorded = (run_dir / "search.json").read_bytes()
        if "search.json" not in found or self.read("search.json") != recorded:
            raise UsageError(
                f"--storage {self.uri} holds something other than the copy of {run_dir} (its search.json differs "
                "or is missing); choose the URI this run was copied to, or an empty one"
            )

    def holds_run(self) -> bool:
        """Whether a search was started here (its ``search.json`` is in the copy)."""
        return self.is_file("search.json")

    def upload(self, local: Path, relative: str) -> None:
        """One file into the copy, whole or not at all."""
        with local.open("rb") as source:
            self.write(relative, source)

    def pull_records(self, run_dir: Path) -> int:
        """Fetch what a run's report reads into ``run_dir`` (its records, the Optuna journal, Tune's
        per-trial logs), none of its checkpoints; the count."""
        files = [f for f in self.listing() if f in REPORT_RECORDS or (f.startswith("tune/") and f.endswith(TUNE_LOGS))]
        return self._download_all(files, run_dir)

    def pull(self, run_dir: Path, under: tuple[str, ...] = ("",)) -> int:
        """Fetch the copy's files whose paths start with one of ``under`` into ``run_dir``; the count."""
        return self._download_all([f for f in self.listing() if f.startswith(under)], run_dir)

    def _download_all(self, files: list[str], run_dir: Path) -> int:
        for relative in files:
            self.download(relative, run_dir / relative)
        return len(files)


class RunMirror:
    """Keeps a storage copy of one run directory current: each ``sync`` uploads what is new or changed
    since the last (by size and modification time) and deletes what the run directory no longer holds.
    The driver is the copy's only writer."""

    def __init__(self, storage: RunStorage, run_dir: Path) -> None:
        self.storage, self.run_dir = storage, run_dir
        self.behind = False  # the last sync failed: the copy lacks some of the run
        self._sent: dict[str, tuple[int, int] | None] | None = None  # what the copy holds: local stamp, if known
        self._lock = threading.Lock()

    def _local_files(self) -> tuple[dict[str, tuple[int, int]], bool]:
        """The run directory's files to copy, with their stamps, and whether the walk saw all of it (a
        directory freed or renamed while walked is not seen; what was not seen is not deleted)."""
        files, errors = {}, []
        for directory, _, names in os.walk(self.run_dir, onerror=errors.append):
            for name in names:
                path = Path(directory) / name
                relative = path.relative_to(self.run_dir).as_posix()
                if _stays_local(relative) or path.is_symlink():
                    continue
                try:
                    stat = path.stat()
                except FileNotFoundError:  # freed while we looked
                    continue
                files[relative] = (stat.st_size, stat.st_mtime_ns)
        return files, not errors

    def sync(self) -> tuple[int, int]:
        """Bring the copy up to date now; (files uploaded, files deleted)."""
        with self._lock:
            if self._sent is None:  # the copy as found: a resumed run's files need not go up again
                found = self.storage.listing()
                self._sent, sizes = dict.fromkeys(found), found
            else:
                sizes = {}
            local, whole = self._local_files()
            uploaded = 0
            for relative, stamp in local.items():
                if relative in self._sent and self._sent[relative] == stamp:
                    continue
                found_whole = sizes.get(relative) == stamp[0] and _written_once(relative)
                if relative in self._sent and self._sent[relative] is None and found_whole:
                    self._sent[relative] = stamp
                    continue
                try:
                    self.storage.upload(self.run_dir / relative, relative)
                except FileNotFoundError:  # freed while we copied: deleted from the copy below, next time
                    continue
                self._sent[relative] = stamp
                uploaded += 1
            gone = [relative for relative in self._sent if relative not in local] if whole else []
            for relative in gone:
                self.storage.delete_file(relative)
                del self._sent[relative]
            return uploaded, len(gone)

    @contextmanager
    def periodically(self, every: float = MIRROR_EVERY_S) -> Iterator[None]:
        """Sync in the background every ``every`` seconds while the block runs (a failed sync is said
        and retried at the next), then once more at its end, whatever ends it; ``behind`` says whether
        that last one failed (the run directory is whole either way)."""
        stop = threading.Event()

        def loop() -> None:
            while not stop.wait(every):
                try:
                    self.sync()
                except Exception as err:  # said; the next sync tries again, and the last one decides
                    print(f"doctune: warning: copying the run to {self.storage.uri}: {err}", file=sys.stderr)

        thread = threading.Thread(target=loop, name="run-mirror", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()
            began = time.perf_counter()
            try:
                uploaded, deleted = self.sync()
            except Exception as err:  # said, never raised over what ended the block
                self.behind = True
                print(
                    f"doctune: error: the run could not be copied to {self.storage.uri} ({err}); {self.run_dir} "
                    "is whole: run the same command with --resume to copy it",
                    file=sys.stderr,
                )
            else:
                self.behind = False
                print(
                    f"doctune: run copied to {self.storage.uri} ({uploaded} file(s) uploaded, {deleted} deleted, "
                    f"{time.perf_counter() - began:.1f} s)",
                    flush=True,
                )
