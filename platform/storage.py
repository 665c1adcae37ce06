"""A run's durable copy at a storage URI (``--storage``): a bucket, or a directory elsewhere.

``python -m platform.search SPEC --storage s3://bucket/runs/name`` keeps the run directory as the
search's working copy (on the driver's node; shared by the nodes, as without ``--storage``) and
mirrors it to the URI while the search runs and once more when it ends: checkpoints and their scores,
Ray Tune's experiment and Ray Train's run state, the Optuna journal, ``baseline.json``, the
leaderboard, the report, ``best/`` and the timings. What the run directory frees (superseded training
state, ``train.keep_checkpoints``) is freed in the copy too. Only the embedding cache, half-written
``*.partial`` directories and lock files stay local: they are rebuilt or never read back.

From the URI alone a fresh machine continues the search (``--resume --storage URI`` with a run
directory that does not exist yet: the copy is fetched first) or exports a trial
(``python -m platform.export URI --to DIR``). Any file system pyarrow opens by URI works: ``s3://``
(with ``?endpoint_override=HOST:PORT&scheme=http`` for an S3-compatible server), ``gs://``,
``hdfs://``, ``file://`` or a plain path. Credentials come from the environment, as pyarrow reads
them. docs/decisions.md, "Run storage", says why a mirror and what it does not do.
"""

from __future__ import annotations

import shutil
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from platform.common import UsageError

LOCAL_ONLY = ("embeddings",)  # top-level entries never copied: the embedding cache is rebuilt from checkpoints
MIRROR_EVERY_S = 30.0  # while a search runs; a crash of the whole machine loses at most this much of the copy
_CHUNK = 8 << 20
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


@dataclass(frozen=True)
class RunStorage:
    """A storage URI opened through pyarrow: its file system and the path of the run inside it."""

    uri: str
    filesystem: object  # pyarrow.fs.FileSystem
    root: str

    @classmethod
    def open(cls, uri: str, writable: bool = True) -> RunStorage:
        """The URI's file system, checked by a real write, or a read where only reading is needed
        (``UsageError`` naming what is wrong)."""
        import pyarrow
        import pyarrow.fs

        try:  # a plain path is a directory on this machine
            filesystem, root = pyarrow.fs.FileSystem.from_uri(uri if "://" in uri else str(Path(uri).resolve()))
        except (pyarrow.ArrowInvalid, ValueError) as err:
            raise UsageError(f"--storage {uri}: {err}; give {URI_HELP}") from None
        storage = cls(uri, filesystem, root.rstrip("/"))
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
            access = "write" if writable else "read"
            raise UsageError(
                f"--storage {uri}: cannot {access} there ({str(err).splitlines()[0]}); check that the bucket "
                f"exists, the credentials in the environment allow {access}ing, and the server is reachable"
            ) from None
        return storage

    def _path(self, relative: str) -> str:
        return f"{self.root}/{relative}"

    def holds_run(self) -> bool:
        """Whether a search was started here (its ``search.json`` is in the copy)."""
        import pyarrow.fs

        return self.filesystem.get_file_info(self._path("search.json")).type == pyarrow.fs.FileType.File

    def listing(self) -> dict[str, int]:
        """Every file of the copy, by path relative to the run: its size."""
        import pyarrow.fs

        selector = pyarrow.fs.FileSelector(self.root, recursive=True, allow_not_found=True)
        files = {}
        for info in self.filesystem.get_file_info(selector):
            if info.type == pyarrow.fs.FileType.File:
                files[info.path[len(self.root) + 1 :]] = info.size
        return files

    def upload(self, local: Path, relative: str) -> None:
        with local.open("rb") as source, self.filesystem.open_output_stream(self._path(relative)) as out:
            shutil.copyfileobj(source, out, _CHUNK)

    def download(self, relative: str, local: Path) -> None:
        """One file of the copy to ``local``, whole or not at all."""
        local.parent.mkdir(parents=True, exist_ok=True)
        partial = local.with_name(local.name + ".download")
        with self.filesystem.open_input_stream(self._path(relative)) as source, partial.open("wb") as out:
            shutil.copyfileobj(source, out, _CHUNK)
        partial.replace(local)

    def delete(self, relative: str) -> None:
        try:
            self.filesystem.delete_file(self._path(relative))
        except FileNotFoundError:
            pass

    def pull(self, run_dir: Path, under: tuple[str, ...] = ("",)) -> int:
        """Fetch the copy's files whose paths start with one of ``under`` into ``run_dir``; the count."""
        files = [f for f in self.listing() if f.startswith(under)]
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

    def _local_files(self) -> dict[str, tuple[int, int]]:
        files = {}
        for path in self.run_dir.rglob("*"):
            relative = path.relative_to(self.run_dir).as_posix()
            if _stays_local(relative):
                continue
            try:
                if path.is_file():
                    stat = path.stat()
                    files[relative] = (stat.st_size, stat.st_mtime_ns)
            except FileNotFoundError:  # freed while we looked
                continue
        return files

    def sync(self) -> tuple[int, int]:
        """Bring the copy up to date now; (files uploaded, files deleted)."""
        with self._lock:
            if self._sent is None:  # the copy as found: a resumed run's files need not go up again
                found = self.storage.listing()
                self._sent, sizes = dict.fromkeys(found), found
            else:
                sizes = {}
            local = self._local_files()
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
            gone = [relative for relative in self._sent if relative not in local]
            for relative in gone:
                self.storage.delete(relative)
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
                except OSError as err:
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
            except OSError as err:  # said, never raised over what ended the block
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
