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

import math
from dataclasses import dataclass

Z_LEVEL = 1.959964  # two-sided 5%
Z_POWER = 0.841621  # 80% power


@dataclass(frozen=True)
class Reference:
    """One task type's measured noise per item and typical difference between trials."""

    task: str  # the task it was measured on
    sigma: float
    typical_difference: float

    @property
    def min_items(self) -> int:
        return math.ceil(((Z_LEVEL + Z_POWER) * self.sigma / self.typical_difference) ** 2)


# bench/ranking_noise.py on the default search at --profile local (bench/results/ranking_noise.json,
# the median over two searches with different seeds; a test keeps these equal to that file)
REFERENCES = {
    "retrieval": Reference("news-title-retrieval", sigma=0.180, typical_difference=0.0591),
    "probe": Reference("r8-fewshot", sigma=0.246, typical_difference=0.0261),
}


def small_parts(part_items: dict[str, tuple[str, dict[str, int]]]) -> str | None:
    """One warning, a table with a row per task whose validation or test part is below its type's
    ``min_items`` (None where no part is): ``part_items`` maps a task to its type and items per part
    (``Evaluator.part_items``)."""
    rows = [["task", "items per part", "needed per part (measured on)"]]
    for task, (kind, items) in part_items.items():
        reference = REFERENCES.get(kind)
        if reference is None or min(items.values()) >= reference.min_items:
            continue
        unit = "queries" if kind == "retrieval" else "documents"
        sizes = ", ".join(f"{split} {n}" for split, n in items.items())
        rows.append([task, f"{sizes} {unit}", f"about {reference.min_items} ({reference.task})"])
    if len(rows) == 1:
        return None
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    table = "\n".join("  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows)
    return (
        "these tasks' parts are too small to rank trials: on each alone, two typical trials' difference is "
        "mostly noise. Give a task more items (or dev judgments for validation), raise evaluation.limits, "
        f"or run --profile full\n{table}"
    )
