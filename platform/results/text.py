"""What the console says of a leaderboard's rows (the report and the model card say it too): the
table, the winner's gains task by task, its locked parts, its confirmation and its drift from its
start, and what each task's parts scored."""

from __future__ import annotations

import math

from doctune_core.noise import Gain
from evaluators.leaderboard import LeaderboardRow
from evaluators.lengths import bucket_title
from evaluators.readings import ReadingCount, locked_parts
from evaluators.scores import coverage, part, sizes
from evaluators.tasks.base import SPLITS


def start_drift_lines(best: LeaderboardRow) -> list[str]:
    """The winner's drift from its untrained start on the short tasks' validation texts, one line."""
    if not best.start_cosine:
        return []
    cosines = ", ".join(f"{task} {value:.3f}" for task, value in best.start_cosine.items())
    return [
        f"{best.trial}'s embeddings of short validation texts, mean cosine to its untrained start: {cosines} "
        "(1.000: unmoved; reported only)"
    ]


def format_table(rows: list[LeaderboardRow], tasks: list[str]) -> str:
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


def task_gain_lines(best: LeaderboardRow) -> list[str]:
    """The winner against each baseline and reference row on the test items, one table per task:
    its gain over the whole part and per length bucket of the documents to find, each with its 95%
    paired interval (``*``: beyond noise; ``s``: seed noise included; "too few items": a part the
    rule leaves undecided). For the terminal."""
    if not best.task_gains:
        return []
    tasks = list(dict.fromkeys(task for by_task in best.task_gains.values() for task in by_task))
    every = [
        gain
        for by_task in best.task_gains.values()
        for task in by_task.values()
        for gain in (task, *task.by_stratum.values())
    ]
    seeds = (
        "seed noise included"
        if all(gain.seed_noise for gain in every)
        else "seed noise included where marked s, elsewhere not included"
        if any(gain.seed_noise for gain in every)
        else "seed noise not included"
    )
    lines = [f"{best.trial}'s test gain over what you have (95% interval, * beyond noise, {seeds}):"]
    for task in tasks:
        gains = {row: by_task[task] for row, by_task in best.task_gains.items() if task in by_task}
        buckets = {
            label: bucket.n
            for gain in gains.values()
            for label, bucket in gain.by_stratum.items()
            if label.startswith("len_")
        }
        table = [[task, "all", *(f"{bucket_title(label)} tokens (n {n})" for label, n in buckets.items())]]
        for row, gain in gains.items():
            strata = gain.by_stratum
            table.append([f"over {row}", _gain_cell(gain), *(_gain_cell(strata.get(label)) for label in buckets)])
        widths = [max(len(line[i]) for line in table) for i in range(len(table[0]))]
        lines += ["  " + "  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in table]
    return lines


def locked_part_line(best: LeaderboardRow, reading: ReadingCount) -> str:
    """The locked test parts the winner was read on, each with its part digest (what
    bench/locked-part-readings.md records beside a development reading), and how often they were
    read before on this cache (``reading``)."""
    digests = ", ".join(f"{task} {d}" for task, d in locked_parts(best.scores).items())
    return f"locked test parts read (part digests): {digests}; {reading.describe()} (ledger {reading.ledger})"


def _gain_cell(gain: Gain | None) -> str:
    if gain is None:
        return "-"
    return gain.cell() + ("*" if gain.beyond_noise else "")


def score_with_error(scores: dict[str, float]) -> str:
    if "main" not in scores:
        return "-"
    error = scores.get("main_se")
    return f"{scores['main']:.4f}" + (f"±{error:.4f}" if error is not None and math.isfinite(error) else "")


def coverage_lines(rows: list[LeaderboardRow], tasks: list[str]) -> list[str]:
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
