"""An encoder's directory as bytes, so it can travel through Ray's object store.

A trial's rank 0 scores every checkpoint it saves on the evaluator actors, which may run on another
node with no file system in common: the checkpoint's encoder (its ``config.json``, weights and
tokenizer files; not ``training_state/``) is read into a ``ModelFiles``, which Ray puts into the
object store as the scoring call's argument, and the evaluator writes it back to a directory of its
own node (``materialize``) to score it. The driver sends the run's checkpoints the same way. Route
of every file a run shares: docs/decisions/no-shared-file-system.md.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from doctune_core.run_files import RunFiles

# what a checkpoint holds beside its encoder, never needed to embed a text
NOT_ENCODER = ("training_state", "scores.json", "report.json", "steps.json")


@dataclass(frozen=True)
class ModelFiles:
    """``files``: each top-level file of an encoder directory (name -> bytes); ``name``: the
    directory's path on the node that read it, for messages and for the evaluator's choice of
    embedding cache (the run's, for a path inside the run)."""

    name: str
    files: dict[str, bytes] = field(repr=False)

    @classmethod
    def read(cls, directory: str | Path, name: str | None = None) -> ModelFiles:
        """The encoder files in ``directory``; ``name``: the path it goes by, if not ``directory``
        (a trial's round, staged on its node, goes by the path its report persists it to)."""
        directory = Path(directory)
        if not directory.is_dir():
            raise FileNotFoundError(f"checkpoint {directory} no longer exists")
        files = {
            path.name: path.read_bytes()
            for path in sorted(directory.iterdir())
            if path.is_file() and path.name not in NOT_ENCODER
        }
        return cls(name or str(directory), files)

    @classmethod
    def read_from(cls, files: RunFiles, relative: str) -> ModelFiles:
        """The encoder files of the run's directory ``relative`` (``doctune_core.run_files``), named by its
        path there: read from the run's storage where it is not a directory of this machine."""
        if files.local:
            return cls.read(files.path(relative))
        names = [name for name in files.children(relative) if name not in NOT_ENCODER]
        if "config.json" not in names:
            raise FileNotFoundError(f"checkpoint {files.path(relative)} holds no encoder")
        return cls(files.path(relative), {name: files.read(f"{relative}/{name}") for name in names})

    @property
    def digest(self) -> str:
        """A hash of every file's name and bytes: two equal encoders share their directory."""
        digest = hashlib.sha256()
        for name in sorted(self.files):
            digest.update(name.encode() + b"\0" + hashlib.sha256(self.files[name]).digest())
        return digest.hexdigest()[:24]

    def materialize(self, root: str | Path) -> Path:
        """The encoder as a directory under ``root`` (``root/<digest>``), written whole once: a
        second call, or another process with the same files, finds it there."""
        target = Path(root) / self.digest
        if target.is_dir():
            return target
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.", suffix=".partial"))
        try:
            for name, data in self.files.items():
                (partial / name).write_bytes(data)
            os.replace(partial, target)
        except OSError:
            shutil.rmtree(partial, ignore_errors=True)
            if not target.is_dir():  # another process renamed its copy first: that one is used
                raise
        return target
