"""Independent batches of seeds, replayed once and kept, so a long run resumes where it stopped.

Batch ``b`` of ``size`` seeds holds seeds ``b * size`` to ``(b + 1) * size - 1`` of every method, so
batch 0 is the comparison's own seeds and no two batches share a seed. A replay is kept as what it
ran (each trial's configuration and rounds, ``replay_decided`` rebuilds the rest), one JSON file per
method and batch, in a cache directory named by a fingerprint of the table as loaded and of the code
the outcome depends on: a changed table, method, ASHA, sampler or Optuna starts a fresh cache instead
of mixing outcomes. A killed run loses at most the batch it was in.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import optuna

from bench.efficiency.methods import METHODS
from bench.efficiency.replay import Replay, replay_decided
from bench.efficiency.table import Table
from core.data.atomic import atomic_file
from platform import samplers


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


def run_batches(
    table: Table,
    samples: dict[str, int],
    batches: int,
    size: int,
    cache: Path | None,
    progress: Callable[[str], None] = lambda line: None,
) -> Batches:
    """Every method of ``samples`` (name -> trials) over ``batches`` batches of ``size`` seeds, read
    from ``cache`` where it holds them and written there as computed (None: no cache)."""
    replays: dict[str, list[list[Replay]]] = {name: [] for name in samples}
    seconds = dict.fromkeys(samples, 0.0)
    for batch in range(batches):
        seeds = range(batch * size, (batch + 1) * size)
        for name, count in samples.items():
            path = None if cache is None else cache / f"{name}-{count}-seeds-{seeds.start}-{seeds.stop - 1}.json"
            if path is not None and path.exists():
                kept = json.loads(path.read_text())
                runs = [replay_decided(table, c, r) for c, r in zip(kept["configs"], kept["rounds"], strict=True)]
            else:
                began = time.perf_counter()
                runs = [METHODS[name](table, seed, count) for seed in seeds]
                kept = {"seconds": time.perf_counter() - began}
                if path is not None:
                    with atomic_file(path, "w", encoding="utf-8") as handle:
                        json.dump(
                            {**kept, "configs": [r.configs for r in runs], "rounds": [r.rounds for r in runs]}, handle
                        )
                progress(f"batch {batch + 1}/{batches}: {name} replayed in {kept['seconds']:.1f} s")
            replays[name].append(runs)
            seconds[name] += kept["seconds"]
    return Batches(replays, seconds)
