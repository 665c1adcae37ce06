"""A run's files on the file system that holds them: a directory, or a bucket opened by URI.

What a trial shares with the rest of a search (its checkpoints' records, its divergence and PBT
records, a donor's checkpoint) is read and written through ``RunFiles``, never through the
driver's disk, so that a trial on any node reaches it: ``RunFiles.at`` opens a plain path or any
URI pyarrow opens (``s3://bucket/prefix``, with ``?endpoint_override=HOST:PORT&scheme=http`` for an
S3-compatible server, ``gs://``, ``file://``). Paths inside the run are relative, ``/``-separated
(``trials/<id>/checkpoints/step_000040``). Credentials come from the environment, as pyarrow reads
them. A ``RunFiles`` pickles (pyarrow's file systems do), so it travels to Ray workers whole.
docs/decisions/no-shared-file-system.md lists each route.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

# bytes a read or write moves at once: an object store's input stream read whole (``read()`` without a
# size) fetches it in ranged requests of a few hundred kilobytes (344 for 90 MB against an S3 server:
# bench/storage_reads.py), one of this size each instead
_CHUNK = 8 << 20


@dataclass(frozen=True)
class RunFiles:
    """A run's root on a pyarrow file system: ``uri`` as given (a plain path made absolute),
    ``filesystem`` and ``root``, the run's path inside it."""

    uri: str
    filesystem: object  # pyarrow.fs.FileSystem
    root: str

    @classmethod
    def at(cls, uri: str | Path) -> RunFiles:
        """The run at ``uri``, opened without a check (``RunStorage.open`` checks by a real write)."""
        import pyarrow.fs

        uri = str(uri)
        if "://" not in uri:
            uri = str(Path(uri).resolve())
        filesystem, root = pyarrow.fs.FileSystem.from_uri(uri)
        return cls(uri, filesystem, root.rstrip("/"))

    @property
    def local(self) -> bool:
        """Whether the run is a directory of this machine's (its paths are paths here)."""
        import pyarrow.fs

        return isinstance(self.filesystem, pyarrow.fs.LocalFileSystem)

    def path(self, relative: str) -> str:
        """``relative``'s path on the file system (a path of this machine where ``local``)."""
        return f"{self.root}/{relative}" if relative else self.root

    def relative(self, path: str) -> str | None:
        """``path`` (as ``path`` gives it) relative to the run; None when it lies outside the run."""
        prefix = f"{self.root}/"
        return path[len(prefix) :] if path.startswith(prefix) else None

    def is_file(self, relative: str) -> bool:
        import pyarrow.fs

        return self.filesystem.get_file_info(self.path(relative)).type == pyarrow.fs.FileType.File

    def children(self, relative: str) -> list[str]:
        """The names of the entries directly under ``relative``, sorted (none where it is absent)."""
        import pyarrow.fs

        selector = pyarrow.fs.FileSelector(self.path(relative), recursive=False, allow_not_found=True)
        return sorted(info.base_name for info in self.filesystem.get_file_info(selector))

    def listing(self, under: str = "") -> dict[str, int]:
        """Every file under ``under`` (the whole run by default), by path relative to it: its size."""
        return {relative: size for relative, (size, _) in self.stamps(under).items()}

    def stamps(self, under: str = "") -> dict[str, tuple[int, int]]:
        """Every file under ``under``, by path relative to it: its size and modification time (ns)."""
        import pyarrow.fs

        base = self.path(under)
        selector = pyarrow.fs.FileSelector(base, recursive=True, allow_not_found=True)
        infos = self.filesystem.get_file_info(selector)
        return {i.path[len(base) + 1 :]: (i.size, i.mtime_ns) for i in infos if i.type == pyarrow.fs.FileType.File}

    def read(self, relative: str) -> bytes:
        with self.filesystem.open_input_stream(self.path(relative)) as source:
            return b"".join(iter(lambda: source.read(_CHUNK), b""))

    def read_json(self, relative: str):
        return json.loads(self.read(relative))

    def write(self, relative: str, source: IO[bytes]) -> None:
        """``source``'s bytes to ``relative``, whole or not at all: written under a name of its own,
        then moved into place (an object store's stream completes its object even when the source
        fails, so its move is a copy inside the store, and a failed write's object is deleted)."""
        target = self.path(relative)
        if self.local:
            self.filesystem.create_dir(target.rpartition("/")[0], recursive=True)
        written = f"{target}.{uuid.uuid4().hex}.partial"
        try:
            with self.filesystem.open_output_stream(written) as out:
                shutil.copyfileobj(source, out, _CHUNK)
            self.filesystem.move(written, target)
        except BaseException:
            self._delete_file(written)
            raise

    def write_json(self, relative: str, value) -> None:
        self.write(relative, io.BytesIO(json.dumps(value, indent=2).encode()))

    def download(self, relative: str, local: Path) -> None:
        """One file to ``local``, whole or not at all, with the modification time it has in the run's
        files (so that a copy fetched is known for the same file: ``platform.rundir.records``)."""
        local.parent.mkdir(parents=True, exist_ok=True)
        partial = local.with_name(local.name + ".download")
        with self.filesystem.open_input_stream(self.path(relative)) as source, partial.open("wb") as out:
            shutil.copyfileobj(source, out, _CHUNK)
        written = self.filesystem.get_file_info(self.path(relative)).mtime_ns
        if written is not None:
            os.utime(partial, ns=(written, written))
        partial.replace(local)

    def write_dir(self, relative: str, local: Path) -> None:
        """Every file under the directory ``local`` to ``relative``, each whole or not at all (the
        directory is not: a reader that needs it whole looks for a file the writer writes last)."""
        for file in sorted(p for p in local.rglob("*") if p.is_file()):
            with file.open("rb") as data:
                self.write(f"{relative}/{file.relative_to(local).as_posix()}", data)

    def download_dir(self, relative: str, local: Path) -> None:
        """The directory ``relative`` to the directory ``local``, whole or not at all: fetched beside it
        and renamed into place. Where another process (a worker of the same node) renamed its copy
        first, that one stays."""
        local.parent.mkdir(parents=True, exist_ok=True)
        fetching = Path(tempfile.mkdtemp(dir=local.parent, prefix=f".{local.name}.", suffix=".partial"))
        try:
            for inside in self.listing(relative):
                self.download(f"{relative}/{inside}", fetching / inside)
            fetching.rename(local)
        except OSError:
            if not local.is_dir():
                raise
        finally:
            shutil.rmtree(fetching, ignore_errors=True)

    @contextmanager
    def as_local_dir(self, relative: str) -> Iterator[Path]:
        """The directory ``relative`` as a directory of this machine for the block: itself where the
        run is local, else fetched whole into a temporary directory, removed when the block ends."""
        if self.local:
            yield Path(self.path(relative))
            return
        import pyarrow.fs

        base = self.path(relative)
        selector = pyarrow.fs.FileSelector(base, recursive=True)
        with tempfile.TemporaryDirectory(prefix="doctune-fetched-") as fetched:
            for info in self.filesystem.get_file_info(selector):
                if info.type == pyarrow.fs.FileType.File:
                    inside = info.path[len(base) + 1 :]
                    self.download(f"{relative}/{inside}", Path(fetched) / inside)
            yield Path(fetched)

    def delete_dir(self, relative: str) -> None:
        """Remove ``relative`` and everything under it (nothing where it is absent)."""
        try:
            self.filesystem.delete_dir(self.path(relative))
        except FileNotFoundError:
            pass

    def delete_file(self, relative: str) -> None:
        self._delete_file(self.path(relative))

    def _delete_file(self, path: str) -> None:
        try:
            self.filesystem.delete_file(path)
        except FileNotFoundError:
            pass
