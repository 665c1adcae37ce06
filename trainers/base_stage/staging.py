"""The base stage on nodes that do not see the driver's cache: its work goes through the run's files.

Where a search keeps its run at a storage URI (``--storage``), its nodes may share no file system
with the driver (docs/decisions/no-shared-file-system.md). The driver still prepares the stage's
work directory in its cache (``stage._prepare``: the tokenizer and initial weights, the token
blocks), then uploads it once under ``base-stage/<digest>/work/``. A Train worker whose node does not
see the driver's work directory fetches it into its own node's cache, whole, under the same name.
Rank 0 uploads each checkpoint (``checkpoints/step_N/``, then a file written last that says it is
whole) and the TensorBoard events so far; every rank of a resumed stage, on whichever node, goes on
from the latest checkpoint uploaded whole. Afterwards the driver fetches the final checkpoint and
every attempt's events into its work directory, finishes the entry as without a bucket, and removes
``base-stage/<digest>`` from the run's files.

Layout in the run's files::

    base-stage/<digest>/work/           init/, blocks.npy and .whole (written last)
    base-stage/<digest>/checkpoints/    step_N/ (with .whole), the latest only
    base-stage/<digest>/tensorboard/    every attempt's event files
    base-stage/<digest>/diverged.json   where the loss stopped being finite
    base-stage/<digest>/ray/            the Ray Train run's own state
"""

from __future__ import annotations

import io
from pathlib import Path

from doctune_core.data.wheels import cache_dir
from doctune_core.run_files import RunFiles
from trainers.checkpoint import latest_step_dir

# the work directory's layout, the driver's and a node's copy alike
INIT_DIR = "init"  # tokenizer, config and initial weights
BLOCKS_FILE = "blocks.npy"  # (blocks, max_length) int32 token ids
CHECKPOINTS_DIR = "checkpoints"
TENSORBOARD_DIR = "tensorboard"
DIVERGED_FILE = "diverged.json"  # written when the loss stops being finite

STAGE = "base-stage"  # in the run's files
WORK = "work"  # what the driver prepared: the tokenizer, initial weights and token blocks
WHOLE = ".whole"  # written last: the directory that holds it was uploaded whole


def staged(digest: str, *parts: str) -> str:
    """A path of the stage ``digest`` in the run's files."""
    return "/".join((STAGE, digest, *parts))


def upload_work(files: RunFiles, work: Path, digest: str) -> None:
    """The driver's prepared work (``init/``, ``blocks.npy``) into the run's files, unless it is there
    whole already (a resumed stage uploaded it before); a divergence an earlier attempt recorded is
    forgotten, as ``stage._prepare`` forgets its own."""
    files.delete_file(staged(digest, DIVERGED_FILE))
    if files.is_file(staged(digest, WORK, WHOLE)):
        return
    files.write_dir(staged(digest, WORK, INIT_DIR), work / INIT_DIR)
    with (work / BLOCKS_FILE).open("rb") as blocks:
        files.write(staged(digest, WORK, BLOCKS_FILE), blocks)
    files.write(staged(digest, WORK, WHOLE), io.BytesIO(b""))


def work_on_this_node(files: RunFiles, driver_work: Path, digest: str) -> Path:
    """The work directory as this node sees it: the driver's where this node sees it, else this
    node's copy in its own cache (fetched whole the first time), with the latest checkpoint rank 0
    uploaded where it is later than any this node holds."""
    work = driver_work
    if not (work / INIT_DIR).is_dir():
        work = cache_dir() / "bases" / driver_work.name
        if not (work / INIT_DIR).is_dir():
            files.download_dir(staged(digest, WORK), work)
    fetch_latest_checkpoint(files, digest, work)
    return work


def latest_uploaded(files: RunFiles, digest: str) -> str | None:
    """The name of the latest checkpoint uploaded whole (``step_N``), if any."""
    root = staged(digest, CHECKPOINTS_DIR)
    whole = [name for name in files.children(root) if files.is_file(f"{root}/{name}/{WHOLE}")]
    return max(whole, default=None)  # step names are zero-padded


def fetch_latest_checkpoint(files: RunFiles, digest: str, work: Path) -> None:
    """The latest checkpoint uploaded whole into ``work``'s checkpoints, unless ``work`` holds it or a
    later one."""
    uploaded = latest_uploaded(files, digest)
    held = latest_step_dir(work / CHECKPOINTS_DIR)
    if uploaded is not None and (held is None or held.name < uploaded):
        files.download_dir(staged(digest, CHECKPOINTS_DIR, uploaded), work / CHECKPOINTS_DIR / uploaded)


def upload_checkpoint(files: RunFiles, digest: str, work: Path, checkpoint: Path) -> None:
    """Rank 0: ``checkpoint`` into the run's files (then the file that says it is whole), the older
    ones out, and the TensorBoard events written so far beside it."""
    root = staged(digest, CHECKPOINTS_DIR)
    files.write_dir(f"{root}/{checkpoint.name}", checkpoint)
    files.write(f"{root}/{checkpoint.name}/{WHOLE}", io.BytesIO(b""))
    for older in files.children(root):
        if older != checkpoint.name:
            files.delete_dir(f"{root}/{older}")
    if (work / TENSORBOARD_DIR).is_dir():
        files.write_dir(staged(digest, TENSORBOARD_DIR), work / TENSORBOARD_DIR)


def record_divergence(files: RunFiles, digest: str, record: dict) -> None:
    """Rank 0: where the loss stopped being finite, for the driver."""
    files.write_json(staged(digest, DIVERGED_FILE), record)


def fetch_outcome(files: RunFiles, digest: str, work: Path) -> None:
    """The driver, after the Train run: a recorded divergence, the final checkpoint and every
    attempt's TensorBoard events into its work directory."""
    if files.is_file(staged(digest, DIVERGED_FILE)):
        files.download(staged(digest, DIVERGED_FILE), work / DIVERGED_FILE)
    fetch_latest_checkpoint(files, digest, work)
    for name in files.listing(staged(digest, TENSORBOARD_DIR)):
        files.download(staged(digest, TENSORBOARD_DIR, name), work / TENSORBOARD_DIR / name)


def remove(files: RunFiles, digest: str) -> None:
    """The stage's files, once its entry is finished in the driver's cache."""
    files.delete_dir(staged(digest))
