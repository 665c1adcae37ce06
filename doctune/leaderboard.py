"""A finished search as a caller reads it: ``doctune.search`` returns a ``Leaderboard``.

The driver writes its leaderboard in ``leaderboard.json``; ``Leaderboard`` is its one reader and
``LeaderboardRow`` its one row type (``evaluators.leaderboard``), the same the driver builds and the
report, the export and the command line read, so a notebook, a script or a type checker reads a run
as the driver does.
``Leaderboard.read(run_dir)`` opens a run finished earlier.

Rows are ranked by the validation objective (the score that chose each row's checkpoint), and the
rows no trial trained rank among them: the base as given and converted (baselines) and the encoders
a user already has (references). ``Leaderboard.best`` is the search's winner, never one of those.
"""

from __future__ import annotations

from evaluators.leaderboard import Leaderboard, LeaderboardRow

__all__ = ["Leaderboard", "LeaderboardRow"]
