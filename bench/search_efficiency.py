"""Search efficiency of doctune's samplers and schedulers, replayed on a table of real training runs.

    python bench/search_efficiency.py build --spec bench/efficiency_docsplit.yaml   # about an hour on 2 CPUs
    python bench/search_efficiency.py replay --table TABLE.csv [--methods random:16 tpe:16 ...] [--seeds 50]
    python bench/search_efficiency.py diagnose --table TABLE.csv [--partial] [--against OTHER.csv]

The code is the package ``bench.efficiency`` (its docstring says how the replay works); this file is
its command line, run as a script.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __name__ == "__main__":  # run as a script: the project's ``platform`` package must come before the stdlib's
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.efficiency.cli import main

if __name__ == "__main__":
    sys.exit(main())
