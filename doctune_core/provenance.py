"""Where a result came from: doctune's version and the checkout's commit, recorded beside a run
(``search.json``) and beside every reading of a locked test part (``evaluators.readings``)."""

from __future__ import annotations

import subprocess
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # the checkout (or installed tree) doctune runs from


def doctune_version() -> str | None:
    """The installed distribution's version (None where doctune runs from a checkout it was never installed from)."""
    try:
        return metadata.version("doctune")
    except metadata.PackageNotFoundError:
        return None


def git_commit(root: Path = ROOT) -> str | None:
    """The checkout's commit, with ``-dirty`` when tracked files differ from it; None outside a checkout."""
    try:
        commit = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return commit + ("-dirty" if dirty else "")
