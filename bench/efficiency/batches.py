"""Independent batches of seeds, replayed once and kept, so a long run resumes where it stopped.

Batch ``b`` of ``size`` seeds holds seeds ``b * size`` to ``(b + 1) * size - 1`` of every method, so
batch 0 is the comparison's own seeds and no two batches share a seed. A replay is kept as what it
ran (each trial's configuration and rounds, ``replay_decided`` rebuilds the rest), one JSON file per
method and batch, in a cache directory named by a fingerprint of the table as loaded and of the code
the outcome depends on: a changed table, method, ASHA, sampler or Optuna starts a fresh cache instead
of mixing outcomes. A killed run loses at most the batch it was in. With ``jobs`` > 1 the batches
the cache lacks are replayed in that many processes first, each writing its own files, and then
read back like any cached batch (a replay is deterministic in its seed, so the figures are the same).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import optuna

from bench.efficiency.methods import METHODS
from bench.efficiency.replay import Replay, replay_decided
from bench.efficiency.table import Table
from doctune_core.data.atomic import atomic_file
from platform.strategies import samplers


def cache_of(root: Path, table: Table) -> Path:
    """The cache directory for ``table`` under ``root``: its name and a digest of what the methods see
    of it (grid, objectives, schedule, ASHA settings), of the code that decides what a replay runs
    (methods, replay, ASHA, the product's samplers) and of the versions of Optuna and NumPy."""
    digest = hashlib.sha256()
    seen = (table.configs, table.grid, table.steps, table.eval_every, table.rounds, table.asha, table.space)
    digest.update(repr(seen).encode())
    digest.update(table.val.tobytes() + table.test.tobytes())
    here = Path(__file__).parent
    for path in (here / "methods.py", here / "replay.py", here / "asha.py", Path(samplers.__file__)):
        digest.update(path.read_bytes())
    digest.update(f"optuna {optuna.__version__}, numpy {np.__version__}".encode())
    return root / f"{table.name}-{digest.hexdigest()[:16]}"


@dataclass
class Batches:
    """``replays[method][batch][k]``: the replay of seed ``batch * size + k`` (``run_batches``'s
    ``size``); ``seconds[method]``: the time its batches took to replay, summed (as each was first
    computed, cached or not)."""

    replays: dict[str, list[list[Replay]]]
    seconds: dict[str, float]


def _replay_batch(table: Table, name: str, count: int, seeds: range, path: Path | None) -> tuple[list[Replay], float]:
    """One method's replay of ``seeds``, written to ``path`` (when given) as it is kept; its seconds."""
    began = time.perf_counter()
    runs = [METHODS[name](table, seed, count) for seed in seeds]
    seconds = time.perf_counter() - began
    if path is not None:
        with atomic_file(path, "w", encoding="utf-8") as handle:
            kept = {"seconds": seconds, "configs": [r.configs for r in runs], "rounds": [r.rounds for r in runs]}
            json.dump(kept, handle)
    return runs, seconds


def run_batches(
    table: Table,
    samples: dict[str, int],
    batches: int,
    size: int,
    cache: Path | None,
    progress: Callable[[str], None] = lambda line: None,
    jobs: int = 1,
) -> Batches:
    """Every method of ``samples`` (name -> trials) over ``batches`` batches of ``size`` seeds, read
    from ``cache`` where it holds them and written there as computed (None: no cache); ``jobs``
    processes replay what the cache lacks (with a cache only)."""
    cells = [
        (batch, name, count, range(batch * size, (batch + 1) * size))
        for batch in range(batches)
        for name, count in samples.items()
    ]

    def path_of(name: str, count: int, seeds: range) -> Path | None:
        return None if cache is None else cache / f"{name}-{count}-seeds-{seeds.start}-{seeds.stop - 1}.json"

    if jobs > 1 and cache is not None:
        missing = [cell for cell in cells if not path_of(*cell[1:]).exists()]
        with ProcessPoolExecutor(jobs) as pool:
            futures = {pool.submit(_replay_batch, table, *cell[1:], path_of(*cell[1:])): cell for cell in missing}
            for future in as_completed(futures):
                batch, name, _, _ = futures[future]
                progress(f"batch {batch + 1}/{batches}: {name} replayed in {future.result()[1]:.1f} s")
    replays: dict[str, list[list[Replay]]] = {name: [] for name in samples}
    seconds = dict.fromkeys(samples, 0.0)
    for batch, name, count, seeds in cells:
        path = path_of(name, count, seeds)
        if path is not None and path.exists():
            kept = json.loads(path.read_text())
            runs = [replay_decided(table, c, r) for c, r in zip(kept["configs"], kept["rounds"], strict=True)]
            spent = kept["seconds"]
        else:
            runs, spent = _replay_batch(table, name, count, seeds, path)
            progress(f"batch {batch + 1}/{batches}: {name} replayed in {spent:.1f} s")
        replays[name].append(runs)
        seconds[name] += spent
    return Batches(replays, seconds)
