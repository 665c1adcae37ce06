"""A run directory: the names of what Tune and Optuna keep in it, the checks a command makes before
writing one, and records written whole."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from doctune_core.data.atomic import atomic_file
from doctune_core.run_layout import SEARCH_RECORD
from platform.exit_codes import UsageError


def new_directory_problem(option: str, to: Path) -> str | None:
    """Why ``to`` (given as ``option``) cannot receive a command's output, or None: it must be a new
    or empty directory whose nearest existing parent is writable."""
    target = to.resolve()
    if target.is_file() or (target.is_dir() and any(target.iterdir())):
        return f"{option} {to} exists and is not an empty directory; name a new directory, or empty that one"
    parent = next(p for p in [target, *target.parents] if p.exists())
    if not os.access(parent, os.W_OK):
        return f"{option} {to}: {parent} is not writable; name a directory elsewhere"
    return None


def check_run_dir(run_dir: Path, resume: bool) -> None:
    if run_dir.exists() and not resume:
        raise UsageError(
            f"run directory {run_dir} already exists: pass --resume to continue that search, "
            "or --run-dir to start a new one elsewhere"
        )
    if resume and not (run_dir / SEARCH_RECORD).exists():
        raise UsageError(f"--resume: {run_dir} holds no search to resume (no {SEARCH_RECORD}); drop --resume")
    probe_dir = run_dir if run_dir.exists() else next(p for p in run_dir.resolve().parents if p.exists())
    try:  # a real write: permission bits alone say nothing for root, read-only mounts or /proc
        with tempfile.TemporaryFile(dir=probe_dir):
            pass
    except OSError as err:
        raise UsageError(
            f"run directory {run_dir}: cannot write in {probe_dir} ({err.strerror}); choose another --run-dir"
        ) from None
    free = shutil.disk_usage(probe_dir).free
    if free < 1 << 30:
        raise UsageError(
            f"run directory {run_dir}: only {free >> 20} MiB free on its disk; checkpoints need "
            "at least 1 GiB; free space or choose another --run-dir"
        )


def write_atomic(path: Path, text: str) -> None:
    """``text`` as the whole of ``path``, replaced in one rename (``doctune_core.data.atomic``)."""
    with atomic_file(path, "w", encoding="utf-8") as handle:
        handle.write(text)
