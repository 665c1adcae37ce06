"""The leaderboard's rows built: a row per trial from Tune's results (its chosen round), the
baseline and reference rows from their scores, the Pareto front, the confirmation's record. The row
type and its reading and writing are ``evaluators.leaderboard``; what the console says of them,
``platform.results.text``; exporting the winner to ``best/``, ``platform.export``; the plots and
``report.html``, ``platform.report``.
"""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import asdict
from pathlib import Path

from evaluators.leaderboard import LeaderboardRow
from evaluators.scores import main_scores, unflatten
from platform.cluster.quota import nodes_never_came
from trainers.checkpoint import recorded_checkpoint
from trainers.population import exploits
from trainers.settings import TrialSettings

# Tune names a trial's directory ``<trainable>_<trial id>_<index>_<params>_<date>``; the trial ID is a
# searcher's hex ID (``5e89619d``) or, from Tune's own variant generator (PBT, a grid over seeds),
# ``<hex>_<5-digit index>``.
_TRIAL_DIR = re.compile(r"^run_trial_(?P<id>[0-9a-f]+(?:_\d{5})?)_\d+_")  # trainable: trainers.trial.run_trial


def _trial_id_of_dir(name: str) -> str:
    """The trial's ID from its Tune directory's name, for a trial that failed before its first report
    named itself; the name itself when it is not Tune's."""
    match = _TRIAL_DIR.match(name)
    return match["id"] if match else name


def error_reason(error: BaseException | str) -> str:
    """A failed trial's error in a line: the last line of Ray's, or, where its workers waited past
    their bound for nodes, what doctune knows of why (``platform.cluster.quota.nodes_never_came``)."""
    text = str(error).strip()
    return nodes_never_came(text) or text.splitlines()[-1][:300]


def rows_from_results(results, resolved, last_round: bool = False) -> list[LeaderboardRow]:
    """One row per trial: its best evaluation round (``last_round``: its last, as a fixed run that
    chooses nothing reads it), or its error."""
    rows = []
    fixed, files = asdict(resolved.fixed), resolved.train_plan.run_files
    for result in results:
        trial_id = _trial_id_of_dir(Path(result.path).name) if result.path else "?"
        frame = result.metrics_dataframe
        if frame is not None and "trial_id" in frame.columns and len(frame):
            trial_id = str(frame["trial_id"].iloc[-1])
        # built as the trial built them, so what a searched ``views`` decides (recipe, elongate) shows
        hp = asdict(TrialSettings(**{**fixed, **{k: v for k, v in (result.config or {}).items() if k in fixed}}))
        if frame is None or "objective" not in frame.columns or frame["objective"].dropna().empty:
            reason = error_reason(result.error) if result.error else "no evaluation reported"
            rows.append(LeaderboardRow(trial_id, f"error: {reason}", None, None, None, hp))
            continue
        evaluation = resolved.evaluation
        # several objectives: the last round, the one NSGA-II was told; one: the best round. Both
        # read the validation objective: a trial's test scores never choose its checkpoint
        last = evaluation.multi_objective or last_round
        chosen = frame["eval_round"].idxmax() if last else frame["objective"].idxmax()
        best = frame.loc[chosen].to_dict()
        rounds = int(frame["eval_round"].max())
        recorded = best.get("checkpoint")
        checkpoint = files.path(recorded_checkpoint(recorded, trial_id)) if recorded else None
        if result.error:
            status = f"error after round {rounds}: {str(result.error).strip().splitlines()[-1][:200]}"
        elif rounds < resolved.train_plan.eval_rounds:
            status = f"stopped early (round {rounds}/{resolved.train_plan.eval_rounds})"
        else:
            status = "completed"
        rows.append(
            LeaderboardRow(
                trial_id,
                status,
                float(best["objective"]),
                int(best["step"]),
                checkpoint,
                hp,
                unflatten(best, evaluation.tasks),
                {n: float(best[m]) for n, m in zip(evaluation.objectives, evaluation.objective_metrics)},
                # None: a search's rounds score validation only; the winner's test part is read later
                test_objective=_finite_or_none(best.get("test_objective")),
            )
        )
    for row in rows:
        row.lineage = exploits(files, row.trial)
    if resolved.evaluation.multi_objective:
        mark_pareto_front(rows)
    return rows


def round_scores(result, evaluation) -> dict[int, dict]:
    """A trial's validation scores at every round it reported, by step (a round reported twice, by a
    trial that resumed, once)."""
    frame = result.metrics_dataframe
    if frame is None or "objective" not in frame.columns:
        return {}
    return {
        int(report["step"]): unflatten(report, evaluation.tasks)
        for report in frame.to_dict("records")
        if math.isfinite(float(report.get("objective", math.nan)))
    }


def _finite_or_none(value) -> float | None:
    """A reported number, or None where a round did not report it (a missing column reads as NaN)."""
    return float(value) if value is not None and math.isfinite(float(value)) else None


def mark_pareto_front(rows: list[LeaderboardRow]) -> None:
    """Set ``pareto`` on every row no other row dominates (at least as good on every objective,
    better on one; all objectives are maximised). Rows without objectives are never on it."""
    scored = [r for r in rows if r.objectives and all(math.isfinite(v) for v in r.objectives.values())]
    for row in rows:
        mine = list(row.objectives.values())
        row.pareto = row in scored and not any(
            all(o >= m for o, m in zip(other.objectives.values(), mine))
            and any(o > m for o, m in zip(other.objectives.values(), mine))
            for other in scored
        )


def baseline_rows(baselines: dict[str, dict], resolved) -> list[LeaderboardRow]:
    """The rows of ``baseline.json`` (``platform.results.baselines.score_baselines``)."""
    return [baseline_row(row, b["status"], b["model"], b["scores"], resolved) for row, b in baselines.items()]


def baseline_row(trial: str, status: str, model: str | None, scores: dict, resolved) -> LeaderboardRow:
    """A row for an encoder no trial trained (the base as given, the converted base, a reference).
    Its objectives are those whose every task it scored (BM25 has none where a probe counts)."""
    evaluation = resolved.evaluation
    objectives = evaluation.covered_objective_values(main_scores(scores, "val"))
    ranking = next(iter(evaluation.objectives))
    return LeaderboardRow(
        trial,
        status,
        objectives.get(ranking),
        0,
        model,
        {"pooling": resolved.fixed.pooling},
        scores,
        objectives,
        test_objective=evaluation.covered_objective_values(main_scores(scores, "test")).get(ranking),
    )


def reference_rows(references: dict[str, dict], resolved) -> list[LeaderboardRow]:
    """The rows of ``references.json`` (``platform.results.baselines.score_references``): what a user already has."""
    return [
        baseline_row(row, f"reference: {r['description']}", r["model"], r["scores"], resolved)
        for row, r in references.items()
    ]


def confirmation_record(
    winner: LeaderboardRow, winner_seed: int, runs: dict[int, LeaderboardRow], planned: int
) -> dict:
    """What ``search.confirm_seeds`` keeps: the winner's configuration retrained with ``planned`` new
    training seeds, of which ``runs`` (seed -> its row, chosen like a trial's) finished. The mean ±
    sample std is over the new seeds only: the winner's own run was chosen as the best of the
    search, so its test objective is biased upwards (the winner's curse); it is kept apart. With no
    new run finished the mean is NaN and the std None."""
    values = [row.test_objective for row in runs.values()]
    return {
        "winner": {
            "seed": winner_seed,
            "trial": winner.trial,
            "objective": winner.objective,
            "test_objective": winner.test_objective,
        },
        # each run's scores too: the seeds' spread of any task's (or length bucket's) score and gain
        "seeds": {
            str(seed): {
                "trial": row.trial,
                "objective": row.objective,
                "test_objective": row.test_objective,
                "scores": row.scores,
                "checkpoint": row.checkpoint,  # the gains over the baselines are these runs' mean
            }
            for seed, row in sorted(runs.items())
        },
        "test_objective": {
            "mean": statistics.fmean(values) if values else math.nan,
            "std": statistics.stdev(values) if len(values) > 1 else None,
            "n": len(values),
        },
        "failed": planned - len(runs),
    }
