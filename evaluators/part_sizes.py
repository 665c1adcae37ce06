"""Parts too small to rank: a task whose validation or test part holds fewer items than it takes to
tell two typical trials apart is named, in one warning for them all, before the search starts.

What "typical" means comes from a measurement, not a guess: ``bench/ranking_noise.py`` on finished
default searches (bench/RESULTS.md, "Scoring parts sized to decide") gives, per task type, the noise
of a difference between two trials per item (``sigma``: a part of ``n`` items measures a difference
to ``sigma / sqrt(n)``) and the typical difference between two trials of a search
(``typical_difference``). A part needs ``n`` large enough that a difference of that size is found
beyond noise (a paired two-sided test at 5%) with 80% probability:

    n >= ((z_0.975 + z_0.8) * sigma / typical_difference)^2

A task type without a reference (clustering, pairs, length robustness) is not checked. The
references are the default search's, on its vanilla base: a search whose trials differ less (a
contrastively trained base, a narrow space) needs more items than the warning asks for.
"""

from __future__ import annotations

from evaluators.tasks.base import PartSizeReference


def references() -> dict[str, tuple[str, PartSizeReference]]:
    """Each task type's reference and the task it was measured on: the registered tasks that declare
    one (``Task.part_size_reference``)."""
    from evaluators.tasks import TASKS

    found: dict[str, tuple[str, PartSizeReference]] = {}
    for name in TASKS:
        task = TASKS[name]
        if (reference := task.part_size_reference) is not None:
            kind = task.metadata.type
            if kind in found:
                raise ValueError(f"two part-size references for {kind} tasks: {found[kind][0]} and {name}")
            found[kind] = (name, reference)
    return found


def small_parts(part_items: dict[str, tuple[str, dict[str, int]]]) -> str | None:
    """One warning, a table with a row per task whose validation or test part is below its type's
    ``min_items`` (None where no part is): ``part_items`` maps a task to its type and items per part
    (``Evaluator.part_items``)."""
    rows = [["task", "items per part", "needed per part (measured on)"]]
    measured = references()
    for task, (kind, items) in part_items.items():
        if kind not in measured:
            continue
        measured_on, reference = measured[kind]
        if min(items.values()) >= reference.min_items:
            continue
        unit = "queries" if kind == "retrieval" else "documents"
        sizes = ", ".join(f"{split} {n}" for split, n in items.items())
        rows.append([task, f"{sizes} {unit}", f"about {reference.min_items} ({measured_on})"])
    if len(rows) == 1:
        return None
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    table = "\n".join("  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows)
    return (
        "these tasks' parts are too small to rank trials: on each alone, two typical trials' difference is "
        "mostly noise. Give a task more items (or dev judgments for validation), raise evaluation.limits, "
        f"or run --profile full\n{table}"
    )
