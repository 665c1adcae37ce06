"""doctune: hyperparameter searches for contrastive pretraining of document encoders.

From Python (in the calling process)::

    import doctune

    board = doctune.search("docsplit_long", profile="smoke", on_trial=lambda trial, result: print(trial))
    print(board.best.trial, board.best.objective)  # the winner on validation, never a baseline
    scores = doctune.evaluate("all-minilm-l6-v2", ["news-title-retrieval"], max_length=256).scores

From a shell: ``doctune search|study|report|evaluate`` (``doctune.cli``); the driver itself is the
package ``platform`` (``python -m platform.search``).
"""

from __future__ import annotations

from doctune.api import BadInput, SearchFailed, evaluate, load_spec, search
from doctune.leaderboard import Leaderboard, LeaderboardRow
from doctune_core.noise import Gain
from evaluators.evaluate import Evaluation
from evaluators.plan import EvalBudget

__all__ = [
    "BadInput",
    "EvalBudget",
    "Evaluation",
    "Gain",
    "Leaderboard",
    "LeaderboardRow",
    "SearchFailed",
    "evaluate",
    "load_spec",
    "search",
]
