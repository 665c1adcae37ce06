"""A search and a score from Python: the smoke search of the default spec, its winner, and the winner
scored again on a long-document task. Run from any directory once doctune is installed:

    python search_from_python.py

``doctune.search`` runs in this process, as ``doctune search`` does; every argument after the spec
is a keyword. A type checker reads every name here (the package ships ``py.typed``).
"""

from __future__ import annotations

from typing import assert_type

import doctune


def main() -> None:
    board = doctune.search("docsplit_long", profile="smoke", run_dir="runs/from_python")
    best = assert_type(board.best, doctune.LeaderboardRow)  # the winner on validation, never a baseline
    print(f"{best.trial}: validation {best.objective}, test {best.test_objective}")
    for over, gain in best.gains.items():  # its test gain over each baseline, with the verdict in words
        print(f"  over {over}: {gain.describe()}")
    for row in board.baselines + board.references:
        print(f"  {row.trial}: validation {row.objective}")
    assert best.checkpoint is not None
    budget = doctune.EvalBudget(max_queries=30)
    scores = doctune.evaluate(best.checkpoint, ["news-passage-retrieval"], max_length=512, budget=budget)
    assert_type(scores, doctune.Evaluation)
    print(f"news-passage-retrieval (validation): {scores.scores['news-passage-retrieval']['val']['main']:.4f}")


if __name__ == "__main__":
    main()
