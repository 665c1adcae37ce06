"""Search efficiency of doctune's samplers and schedulers, replayed on a table of real training runs.

The tabular benchmark method of HPOBench and LCBench: every configuration of a grid over the search
space is trained once, with its validation and test objective recorded after every evaluation round,
into a table (``table``; built by ``bench/efficiency_table.py``). A search method (``methods``) is then
*replayed* on the table (``replay``): instead of training, a trial looks its numbers up. That costs
microseconds to milliseconds, so every method runs with 50 seeds or more and the comparison
(``compare``, ``aggregate``) is between distributions of outcomes, not between single lucky or unlucky
searches; it is repeated over independent batches of seeds (``batches``, kept in a cache) to show how
far each figure moves from one batch to the next (``intervals``). ``diagnostics`` says how much the
table lets any search find (also of a table still being built, and how two tables of one grid
agree); ``report`` writes the comparison out; ``cli`` is the command line behind
``bench/search_efficiency.py``.

Speed (the 54-configuration, 3-round table of the ``docsplit`` space, on a 2-CPU machine shared with
other jobs; bench/RESULTS.md, "Search efficiency"): per seed, 0.27 s for TPE + ASHA, 0.21 s for
independent TPE, 0.12 s for TPE, nearly all of it Optuna's sampler; 16 ms for random + ASHA (Ray's
``nanpercentile`` at every rung); 1 ms or less for random and grid. 100 batches of 50 seeds of the
six default methods take about 50 minutes, once: later runs read them from the cache.
"""

from __future__ import annotations

import sys

if not hasattr(sys.modules.get("platform"), "__path__"):  # the stdlib module, imported by a library
    sys.modules.pop("platform", None)

from bench.efficiency.aggregate import aggregate, at_budgets, costs, quartiles
from bench.efficiency.asha import AshaBracket
from bench.efficiency.compare import compare
from bench.efficiency.diagnostics import diagnostics, rank_correlation
from bench.efficiency.intervals import intervals, steps_to_target
from bench.efficiency.methods import (
    METHODS,
    grid_order,
    grid_search,
    random_asha,
    random_search,
    tpe_replay,
)
from bench.efficiency.replay import Event, Replay, Trace, replay_decided, replay_order
from bench.efficiency.table import Asha, Dimension, Table, load_table

__all__ = [
    "METHODS",
    "Asha",
    "AshaBracket",
    "Dimension",
    "Event",
    "Replay",
    "Table",
    "Trace",
    "aggregate",
    "at_budgets",
    "compare",
    "costs",
    "diagnostics",
    "grid_order",
    "grid_search",
    "intervals",
    "load_table",
    "quartiles",
    "random_asha",
    "random_search",
    "rank_correlation",
    "replay_decided",
    "replay_order",
    "steps_to_target",
    "tpe_replay",
]
