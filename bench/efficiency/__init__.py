"""Search efficiency of doctune's samplers and schedulers, replayed on a table of real training runs.

The tabular benchmark method of HPOBench and LCBench: every configuration of a grid over the search
space is trained once, with its validation and test objective recorded after every evaluation round,
into a table (``table``; built by ``bench/efficiency_table.py``). A search method (``methods``) is then
*replayed* on the table (``replay``): instead of training, a trial looks its numbers up. That costs
microseconds to milliseconds, so every method runs with 50 seeds or more and the comparison
(``compare``, ``aggregate``) is between distributions of outcomes, not between single lucky or unlucky
searches; it is repeated over independent batches of seeds (``batches``, kept in a cache) to show how
far each figure moves from one batch to the next (``intervals``). ``diagnostics`` says how much the
table lets any search find; ``report`` writes the comparison out; ``cli`` is the command line behind
``bench/search_efficiency.py``.

Speed (measured on one core of a 2-core CPU VM, on a 54-configuration, 4-round table of the
``docsplit`` space): 50 seeds of the six default methods replay in about 5 s, nearly all of it TPE
at 1-2 ms per trial (``tpe_asha`` 2.2 s, ``tpe_independent`` 1.7 s, ``tpe`` 0.9 s; random, grid and
random_asha together 0.15 s).
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
