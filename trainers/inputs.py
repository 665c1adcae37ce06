"""The search's inputs (the prepared corpus, the base model) on a trial's node.

The driver prepares them in its cache (``doctune_core.data.cache_dir``: the corpus's Parquet shards, a
base given a masked-LM head, converted to a Longformer or trained by the base stage). Where the
run is kept at a storage URI (``--storage``), nodes may share no file system with the driver, so
the driver uploads each input found in its cache to the run's files once, under
``inputs/<kind>-<key>/`` (its cache directory's own names: a key of its content), and
``TrainPlan.inputs`` maps the driver's path to that name. A Train worker whose node does not see
the driver's path fetches the input into its own node's cache on first use, whole or not at all
(fetched beside, renamed into place); a node that sees it (the driver's, one sharing its cache)
reads it there. Inputs outside the cache (a model installed with a package, the same on every node
of one locked environment) are read by their path. docs/decisions/no-shared-file-system.md lists every route.
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from pathlib import Path

from doctune_core.data import cache_dir
from doctune_core.run_files import RunFiles

INPUTS = "inputs"  # in the run's files
WHOLE = ".whole"  # written last: an input's upload that holds it was not interrupted


def input_name(path: str | Path) -> str:
    """Where an input in the driver's cache goes in the run's files: ``inputs/<kind>-<key>``."""
    path = Path(path)
    return f"{INPUTS}/{path.parent.name}-{path.name}"


def share_inputs(files: RunFiles, paths: Iterable[str], cache: Path) -> dict[str, str]:
    """Upload each of ``paths`` that lies in ``cache`` to the run's files, unless whole there already;
    the driver's path -> its name there. Nothing where the run's files are this machine's directory
    (its nodes then share the driver's file system, its cache included)."""
    if files.local:
        return {}
    shared = {}
    for path in dict.fromkeys(paths):
        source = Path(path).resolve()
        if not source.is_relative_to(cache.resolve()):
            continue
        name = input_name(source)
        if not files.is_file(f"{name}/{WHOLE}"):
            files.write_dir(name, source)
            files.write(f"{name}/{WHOLE}", io.BytesIO(b""))
        shared[path] = name
    return shared


def on_this_node(files: RunFiles, inputs: dict[str, str], path: str) -> str:
    """``path`` (an input as the driver named it) as a directory of this node: itself where this node
    sees it, else its copy in this node's cache, fetched from the run's files the first time."""
    name = inputs.get(path)
    if name is None or Path(path).is_dir():
        return path
    target = cache_dir() / name
    if not target.is_dir():
        files.download_dir(name, target)
    return str(target)
