"""Cache files written so that a reader never sees half of one, however many processes write."""

from __future__ import annotations

import fcntl
import logging
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

log = logging.getLogger(f"doctune.{__name__}")


@contextmanager
def atomic_file(target: Path, mode: str = "wb", **open_kwargs) -> Iterator[IO]:
    """A file of its own beside ``target``, opened for writing; when the block ends it replaces
    ``target`` in one rename, and if the block raises it is removed. Train workers fill the same
    cache entry at once on a cold cache: each writes its own temporary name and the last rename
    wins, every one with the same content."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".partial")
    try:
        with os.fdopen(fd, mode, **open_kwargs) as handle:
            yield handle
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


@contextmanager
def exclusive_lock(entry: Path) -> Iterator[None]:
    """Hold ``<entry>.lock`` (an advisory file lock), waiting for another process that holds it:
    two processes asking for the same cache entry at once build it once."""
    entry.parent.mkdir(parents=True, exist_ok=True)
    with entry.with_name(entry.name + ".lock").open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log.info(f"doctune: waiting for another process building {entry}")
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
