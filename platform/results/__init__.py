"""What a search establishes once its trials have ended, in one place: the baseline and reference
rows (``baselines``: scored once a run), the trials' rows, the winner's locked test part, the
report-only tasks, the winner's confirmation with more seeds, its gains over every baseline and
reference row, the ranking's noise (``winner``, ``ranking``) and the leaderboard's files
(``leaderboard``).

The search enters it twice: ``baseline_record`` before its trials (the baselines are scored while
the evaluators have nothing else to do, and a resumed search reads them back), and ``establish``
after them, which returns the ``Standing``. No row is changed outside this package, and it never
imports the search's own modules (``platform.search_path.tuner``, ``platform.search_path.resolution``,
``platform.search``): the one thing it needs of them, training a configuration with more seeds, is
handed in.
"""

from __future__ import annotations

from dataclasses import dataclass

from evaluators.references import winner as winner_of
from platform.results.baselines import baseline_record
from platform.results.ranking import RankingNoise
from platform.results.winner import Retrain
from platform.rundir.timings import PhaseClock


@dataclass(frozen=True)
class Standing:
    """A finished search's leaderboard as written (``leaderboard.json``): every row, the task
    columns, and the ranking's noise (None where no trial scored or a checkpoint it needed was gone)."""

    rows: list
    columns: list[str]
    noise: RankingNoise | None

    @property
    def best(self):
        """The winner's row: the trial with the best validation objective, never a baseline; None
        where no trial scored."""
        return winner_of(self.rows)


def establish(resolved, results, *, baseline: dict, clock: PhaseClock, retrain: Retrain) -> Standing:
    """The leaderboard of a search whose trials have ended (``results``: Tune's), its baseline rows'
    record ``baseline``: the rows chosen and written, the winner's locked part read, the report-only
    tasks scored, the winner confirmed (``retrain``, where ``search.confirm_seeds`` asks), its gains
    and the ranking's noise measured, the leaderboard written again with them."""
    from evaluators.leaderboard import write_leaderboard
    from platform.results import leaderboard, winner
    from platform.results.baselines import reference_record

    evaluation, run_dir = resolved.evaluation, resolved.run_dir
    references = reference_record(resolved, clock) if evaluation.references else {}
    rows = leaderboard.rows_from_results(results, resolved)
    scored = [r for r in rows if r.objective is not None]
    locked = "test" in evaluation.parts  # else validation only: no locked part read, no test verdict
    if scored and locked:
        with clock.phase("locked test part"):
            winner.read_locked_part_of_winner(scored, resolved)
    if scored and evaluation.report_tasks:
        with clock.phase("report-only tasks"):
            winner.score_report_tasks(scored, resolved)
    columns = [*evaluation.tasks, *evaluation.report_tasks]
    baselines = leaderboard.baseline_rows(baseline, resolved)
    reference_rows = leaderboard.reference_rows(references, resolved)
    rows = write_leaderboard([*baselines, *reference_rows, *rows], run_dir, columns)
    if not scored:
        return Standing(rows, columns, None)
    outcomes = winner.ItemOutcomes(resolved)
    best = winner_of(rows)
    if locked:
        best.locked_reading = winner.record_search_reading(resolved, rows, best)
    if resolved.search.confirm_seeds:  # first: the training seeds' spread joins every interval below
        with clock.phase("confirmation"):
            best.confirmation = winner.confirm_winner(resolved, best, retrain)
    with clock.phase("noise"):
        if locked:
            winner.compare_with_baselines(best, baselines, outcomes)
            winner.compare_per_task(best, baselines, resolved)
        noise = winner.assess_ranking(rows, baselines, outcomes)
        winner.measure_start_drift(scored, baselines, resolved)
    rows = write_leaderboard(rows, run_dir, columns, noise.record() if noise else None)
    return Standing(rows, columns, noise)


def verdict_lines(standing: Standing) -> list[str]:
    """What the standing says of its winner, one line each: its locked part, its gains over the
    baselines (with the ranking's verdict where its noise was measured), on the long-document tasks
    pooled, task by task, and its confirmation."""
    from platform.results import ranking, text

    best = standing.best
    drift = text.start_drift_lines(best)
    if not best.locked_reading:  # validation only: no test verdict
        return (ranking.verdict(standing.noise) if standing.noise is not None else []) + drift
    reading = best.locked_reading
    lines = [text.locked_part_line(best, reading)]
    if standing.noise is not None:
        lines += ranking.verdict(standing.noise, best.gains, reading)
    else:
        lines += [
            f"test objective of {best.trial} over {against}: {gain.describe()} [{reading.describe()}]"
            for against, gain in best.gains.items()
        ]
    tested = [
        f"long-document tasks pooled, {best.trial} over {against} on test: {gain.describe()}"
        for against, gain in best.long_task_gains.items()
    ]
    tested += text.task_gain_lines(best)
    if best.confirmation:
        tested.append(f"{best.trial}'s configuration {text.describe_confirmation(best.confirmation)}")
    # every test verdict says how often its locked part was read before (a table's rows, by its title)
    return lines + [line if line.startswith("  ") else f"{line} [{reading.describe()}]" for line in tested] + drift


__all__ = ["Standing", "baseline_record", "establish", "verdict_lines"]
