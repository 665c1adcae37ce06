"""The end of a search: the leaderboard (terminal, CSV, JSON) and its winner.

Exporting the winner to ``best/`` (and any trial elsewhere) is ``platform.export``; the plots and
``report.html`` are ``platform.report``.
"""

from __future__ import annotations

import csv
import json
import math
import re
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path

from doctune_core.noise import Gain
from doctune_core.run_files import RunFiles
from doctune_core.run_layout import LEADERBOARD_CSV, LEADERBOARD_FILE
from evaluators.lengths import bucket_title
from evaluators.readings import ReadingCount, locked_parts
from evaluators.references import BASELINE_PREFIX, row_kind
from evaluators.scores import coverage, main_scores, part, sizes, unflatten
from evaluators.tasks.base import SPLITS
from trainers.checkpoint import CHECKPOINTS, SCORES_FILE, recorded_checkpoint, reported_rounds, trial_path
from trainers.population import exploits
from trainers.settings import TrialSettings

BASELINE_ID = BASELINE_PREFIX  # the base encoder as the spec names it
CONVERTED_BASELINE_ID = "baseline-converted"  # the same after the backbone conversion, untrained
INTERPOLATED_BASELINE_ID = "baseline-interpolated"  # converted with interpolated positions, untrained


@dataclass
class Row:
    """One leaderboard row. ``objective`` (and ``objectives``) are the validation objective that
    chose this row's checkpoint and ranks it; ``test_objective`` and each task's ``test`` scores
    are what the row reports (``evaluators.scores``): read once the search has chosen, for the
    baselines, the reference rows and the winner only (None on the other trials)."""

    trial: str
    status: str
    objective: float | None
    step: int | None
    # a trial's: its path on the run's file system (``RunFiles.path``: a bucket's path where the run is
    # stored there); a baseline's: the model directory
    checkpoint: str | None
    hyperparameters: dict
    scores: dict[str, dict] = field(default_factory=dict)
    # each named objective's value (a single-objective search has one, equal to ``objective``)
    objectives: dict[str, float] = field(default_factory=dict)
    pareto: bool = False  # on the Pareto front of the trials (multi-objective searches)
    test_objective: float | None = None
    # the winner's test-objective gain over each baseline row, with its paired interval (``doctune_core.noise.Gain``)
    gains: dict[str, dict] = field(default_factory=dict)
    # the same on the objective's long-document tasks pooled with their objective weights
    long_task_gains: dict[str, dict] = field(default_factory=dict)
    # the winner's test gain on each task over each baseline and reference row that scored it:
    # row id -> task -> paired-interval record (``doctune_core.noise.Gain``)
    task_gains: dict[str, dict[str, dict]] = field(default_factory=dict)
    # the winner's configuration retrained with new seeds (search.confirm_seeds): their test objective's
    # mean ± std, and the winner's own run apart (``confirmation_record``)
    confirmation: dict = field(default_factory=dict)
    # PBT: each time the trial went on from another trial's checkpoint (trainers.population.exploits)
    lineage: list[dict] = field(default_factory=list)
    # the winner's: how often the locked parts its test verdicts rest on were read before on this cache
    # (``evaluators.readings.ReadingCount``); empty where no locked part was read
    locked_reading: dict = field(default_factory=dict)
    # a trial's: per short task, the mean cosine between its and its untrained start's embeddings of the
    # task's short validation texts (``evaluators.pool.Evaluator.start_cosine``: 1.0 unmoved); reported only
    start_cosine: dict[str, float] = field(default_factory=dict)

    def test_score(self, task: str) -> float | None:
        return part(self.scores, task, "test").get("main")

    def flat(self, tasks: list[str]) -> dict:
        out = {
            "trial": self.trial,
            "status": self.status,
            "objective": self.objective,
            "test_objective": self.test_objective,
            "step": self.step,
            "checkpoint": self.checkpoint,
        }
        if len(self.objectives) > 1:
            out |= {f"objective.{name}": value for name, value in self.objectives.items()}
            out["pareto"] = self.pareto
        if self.lineage:
            out["lineage"] = describe_lineage(self.lineage)
        out |= {f"hp.{k}": v for k, v in sorted(self.hyperparameters.items())}
        for task in tasks:
            out[task] = self.test_score(task)
            out[f"{task}.se"] = part(self.scores, task, "test").get("main_se")
            out[f"{task}.val"] = part(self.scores, task, "val").get("main")
        return out


def start_drift_lines(best: Row) -> list[str]:
    """The winner's drift from its untrained start on the short tasks' validation texts, one line."""
    if not best.start_cosine:
        return []
    cosines = ", ".join(f"{task} {value:.3f}" for task, value in best.start_cosine.items())
    return [
        f"{best.trial}'s embeddings of short validation texts, mean cosine to its untrained start: {cosines} "
        "(1.000: unmoved; reported only)"
    ]


def describe_lineage(lineage: list[dict]) -> str:
    """A PBT trial's exploits in a line: ``round 1: from <trial> (step 2); ...``."""
    return "; ".join(f"round {e['round']}: from {e['donor']} (step {e['step']})" for e in lineage)


# Tune names a trial's directory ``<trainable>_<trial id>_<index>_<params>_<date>``; the trial ID is a
# searcher's hex ID (``5e89619d``) or, from Tune's own variant generator (PBT, a grid over seeds),
# ``<hex>_<5-digit index>``.
_TRIAL_DIR = re.compile(r"^run_trial_(?P<id>[0-9a-f]+(?:_\d{5})?)_\d+_")  # trainable: trainers.trial.run_trial


def _trial_id_of_dir(name: str) -> str:
    """The trial's ID from its Tune directory's name, for a trial that failed before its first report
    named itself; the name itself when it is not Tune's."""
    match = _TRIAL_DIR.match(name)
    return match["id"] if match else name


def rows_from_results(results, resolved, last_round: bool = False) -> list[Row]:
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
            reason = str(result.error).strip().splitlines()[-1][:300] if result.error else "no evaluation reported"
            rows.append(Row(trial_id, f"error: {reason}", None, None, None, hp))
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
            Row(
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


def chosen_checkpoint(files: RunFiles, trial_id: str, evaluation) -> str | None:
    """The round (a ``step_N`` name) an ended trial's row shows, from its scored rounds in the run's
    files, by the rule ``rows_from_results`` applies to its reports: one objective, the round with the
    best validation objective (the earliest on a tie); several, the last round. None when nothing was
    scored."""
    scores = {name: trial_path(trial_id, CHECKPOINTS, name, SCORES_FILE) for name in reported_rounds(files, trial_id)}
    scored = [name for name, path in scores.items() if files.is_file(path)]
    if not scored or evaluation.multi_objective:
        return scored[-1] if scored else None
    objectives = [
        evaluation.reported_objectives(main_scores(files.read_json(scores[name]), "val"))["objective"]
        for name in scored
    ]
    return scored[objectives.index(max(objectives))]


def mark_pareto_front(rows: list[Row]) -> None:
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


def baseline_rows(baselines: dict[str, dict], resolved) -> list[Row]:
    """The rows of ``baseline.json`` (``platform.results.baselines.score_baselines``)."""
    return [baseline_row(row, b["status"], b["model"], b["scores"], resolved) for row, b in baselines.items()]


def baseline_row(trial: str, status: str, model: str | None, scores: dict, resolved) -> Row:
    """A row for an encoder no trial trained (the base as given, the converted base, a reference).
    Its objectives are those whose every task it scored (BM25 has none where a probe counts)."""
    evaluation = resolved.evaluation
    objectives = evaluation.covered_objective_values(main_scores(scores, "val"))
    ranking = next(iter(evaluation.objectives))
    return Row(
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


def reference_rows(references: dict[str, dict], resolved) -> list[Row]:
    """The rows of ``references.json`` (``platform.results.baselines.score_references``): what a user already has."""
    return [
        baseline_row(row, f"reference: {r['description']}", r["model"], r["scores"], resolved)
        for row, r in references.items()
    ]


def is_baseline(row: Row) -> bool:
    """Whether no trial trained the row: a baseline (the base as given or converted) or a reference."""
    return row_kind(row.trial) != "trial"


def is_reference(row: Row) -> bool:
    return row_kind(row.trial) == "reference"


def _rank_key(row: Row) -> float:
    return -row.objective if row.objective is not None and math.isfinite(row.objective) else math.inf


def write_leaderboard(rows: list[Row], run_dir: Path, tasks: list[str], noise: dict | None = None) -> list[Row]:
    """``leaderboard.csv`` (a row per line) and ``leaderboard.json``: ``{"rows": [...], "noise":
    ...}``, the ranked rows and the ranking's noise (``platform.results.ranking``; None until assessed)."""
    rows = sorted(rows, key=_rank_key)
    flat = [row.flat(tasks) for row in rows]
    columns = list(dict.fromkeys(key for record in flat for key in record))
    with (run_dir / LEADERBOARD_CSV).open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(flat)
    record = {"rows": [asdict(row) for row in rows], "noise": noise}
    (run_dir / LEADERBOARD_FILE).write_text(json.dumps(record, indent=2))
    return rows


def read_leaderboard(run_dir: Path) -> tuple[list[Row], dict | None]:
    """The ranked rows of ``leaderboard.json`` and the ranking's noise (None where it was not
    assessed: a leaderboard written before the assessment existed holds a plain list of rows)."""
    record = json.loads((run_dir / LEADERBOARD_FILE).read_text())
    if isinstance(record, list):
        return [Row(**row) for row in record], None
    return [Row(**row) for row in record["rows"]], record.get("noise")


def format_table(rows: list[Row], tasks: list[str]) -> str:
    """The leaderboard for a terminal: the validation objective that ranks the rows, then what they
    report, the test objective and each task's test score ± its standard error; with several
    objectives, one column each and ``*`` marking the Pareto front."""
    names = list(dict.fromkeys(n for row in rows if len(row.objectives) > 1 for n in row.objectives))
    objective_names = [f"{n} (val)" for n in names] or ["objective (val)"]
    header = ["rank", "trial", *objective_names, "test objective", *(f"{t} (test)" for t in tasks), "status"]
    if names:
        header.insert(2, "front")
    lines = [header]
    score = lambda v: f"{v:.4f}" if isinstance(v, float) else "-"  # noqa: E731
    for rank, row in enumerate(rows, start=1):
        objectives = [score(row.objectives.get(n)) for n in names] if names else [score(row.objective)]
        lines.append(
            [
                str(rank),
                row.trial,
                *(["*" if row.pareto else ""] if names else []),
                *objectives,
                score(row.test_objective),
                *(score_with_error(part(row.scores, t, "test")) for t in tasks),
                row.status,
            ]
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in lines)


def confirmation_record(winner: Row, winner_seed: int, runs: dict[int, Row], planned: int) -> dict:
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


def describe_confirmation(confirmation: dict) -> str:
    """The confirmation in one sentence (the report's and the model card's)."""
    stats, own = confirmation["test_objective"], confirmation["winner"]
    apart = f"the winner's own run, chosen as the best, {own['test_objective']:.4f} apart"
    if stats["n"] == 0:
        return f"retrained with new training seeds, every run failed ({confirmation['failed']}); {apart}"
    spread = f" ± {stats['std']:.4f} (mean ± sample std)" if stats["std"] is not None else ""
    seeds = "1 new training seed" if stats["n"] == 1 else f"{stats['n']} new training seeds"
    failed = f", {confirmation['failed']} more failed" if confirmation["failed"] else ""
    return f"retrained with {seeds}{failed}: test objective {stats['mean']:.4f}{spread}; {apart}"


def task_gain_lines(best: Row) -> list[str]:
    """The winner against each baseline and reference row on the test items, one table per task:
    its gain over the whole part and per length bucket of the documents to find, each with its 95%
    paired interval (``*``: beyond noise; ``s``: seed noise included; "too few items": a part the
    rule leaves undecided). For the terminal."""
    if not best.task_gains:
        return []
    tasks = list(dict.fromkeys(task for by_task in best.task_gains.values() for task in by_task))
    records = [
        r
        for by_task in best.task_gains.values()
        for task in by_task.values()
        for r in (task, *task.get("by_stratum", {}).values())
    ]
    seeds = (
        "seed noise included"
        if all(r.get("seed_noise") for r in records)
        else "seed noise included where marked s, elsewhere not included"
        if any(r.get("seed_noise") for r in records)
        else "seed noise not included"
    )
    lines = [f"{best.trial}'s test gain over what you have (95% interval, * beyond noise, {seeds}):"]
    for task in tasks:
        gains = {row: by_task[task] for row, by_task in best.task_gains.items() if task in by_task}
        buckets = {
            label: bucket["n"]
            for record in gains.values()
            for label, bucket in record.get("by_stratum", {}).items()
            if label.startswith("len_")
        }
        table = [[task, "all", *(f"{bucket_title(label)} tokens (n {n})" for label, n in buckets.items())]]
        for row, record in gains.items():
            strata = record.get("by_stratum", {})
            table.append([f"over {row}", _gain_cell(record), *(_gain_cell(strata.get(label)) for label in buckets)])
        widths = [max(len(line[i]) for line in table) for i in range(len(table[0]))]
        lines += ["  " + "  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in table]
    return lines


def locked_part_line(best: Row, reading: ReadingCount) -> str:
    """The locked test parts the winner was read on, each with its part digest (what
    bench/locked-part-readings.md records beside a development reading), and how often they were
    read before on this cache (``reading``)."""
    digests = ", ".join(f"{task} {d}" for task, d in locked_parts(best.scores).items())
    return f"locked test parts read (part digests): {digests}; {reading.describe()} (ledger {reading.ledger})"


def _gain_cell(record: dict | None) -> str:
    if record is None:
        return "-"
    gain = Gain.from_record(record)
    return gain.cell() + ("*" if gain.beyond_noise else "")


def score_with_error(scores: dict[str, float]) -> str:
    if "main" not in scores:
        return "-"
    error = scores.get("main_se")
    return f"{scores['main']:.4f}" + (f"±{error:.4f}" if error is not None and math.isfinite(error) else "")


def coverage_lines(rows: list[Row], tasks: list[str]) -> list[str]:
    """What each task's parts scored of what its collection holds, each part from the first row scored
    on it (every row is scored on the same items; most trials on validation only), e.g.
    ``beir:cranfield: val 200 of 1,400 documents, 56 of 112 queries; ...``; tasks without sizes are
    left out."""
    lines = []
    for task in tasks:
        scored = {
            split: next((row.scores[task][split] for row in rows if split in row.scores.get(task, {})), {})
            for split in SPLITS
        }
        parts = [f"{split} {coverage(scored[split])}" for split in SPLITS if sizes(scored[split])]
        if parts:
            lines.append(f"{task}: " + "; ".join(parts))
    return lines
