"""The comparison: every method replayed over the same seeds, summarised, with the table's diagnostics."""

from __future__ import annotations

import time

from bench.efficiency.aggregate import aggregate
from bench.efficiency.diagnostics import diagnostics
from bench.efficiency.methods import METHODS
from bench.efficiency.replay import Trace
from bench.efficiency.table import Table


def replay(table: Table, samples: dict[str, int], seeds: int) -> dict:
    """Every method of ``samples`` (name -> trials) replayed with seeds ``0..seeds-1``, aggregated;
    each method's replay wall time is under ``methods.<name>.seconds``."""
    traces: dict[str, list[Trace]] = {}
    seconds: dict[str, float] = {}
    for name, count in samples.items():
        began = time.perf_counter()
        traces[name] = [METHODS[name](table, seed, count).events for seed in range(seeds)]
        seconds[name] = time.perf_counter() - began
    result = aggregate(table, traces, samples)
    for name, entry in result["methods"].items():
        entry["seconds"] = round(seconds[name], 3)
    result["diagnostics"] = diagnostics(table)
    return result
