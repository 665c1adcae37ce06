"""What a search's run directory holds, by name: the one place a command, the report, the export,
the trackers or the public API learn where a run keeps its records.

Here, below the driver and the public API both, because ``doctune.Leaderboard`` reads a run without
importing the driver (``platform``, which shares its name with the standard library's module).
"""

from __future__ import annotations

SEARCH_RECORD = "search.json"  # the resolved search, written when the run directory is created
LEADERBOARD_FILE = "leaderboard.json"  # every row, ranked, with its scores, gains and the ranking's noise
LEADERBOARD_CSV = "leaderboard.csv"  # the same rows, one a line
REPORT_FILE = "report.html"
PLOTS_DIR = "plots"  # the report's figures
TIMINGS_FILE = "timings.json"  # where the wall time went
BEST_DIR = "best"  # the winner, exported
OPTUNA_JOURNAL = "optuna.journal"  # the search's Optuna study (``optuna-dashboard RUN_DIR/optuna.journal``)
TUNE_DIR = "tune"  # Tune's experiments, in the run's files: tune/<spec name>/<trial directory>/
TRIALS_DIR = "trials"  # each trial's checkpoints and records: trials/<trial id>/
