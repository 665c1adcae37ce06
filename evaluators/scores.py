"""The shape of a checkpoint's scores, written once for the trial, the driver and the reports.

A checkpoint's scores are ``{task: {"val": {metric: value}, "test": {metric: value}, "split": how,
<share of over-length texts>}}``: each part's metrics hold ``main`` (the task's main score),
``main_se`` (its standard error) and ``n`` (items scored). Reported to Tune and TensorBoard they
are flattened to ``<part>/<task>/<metric>`` (a task name may hold ``/``, a metric never does).

Selection reads ``val`` only (``main_scores(scores, "val")`` feeds the objective); what is
reported as a result reads ``test``.
"""

from __future__ import annotations

from evaluators.tasks.base import SPLITS, Split

Scores = dict[str, dict]


def main_scores(scores: Scores, split: Split) -> dict[str, float]:
    """Each task's main score on one part, for the tasks scored on it."""
    return {task: values[split]["main"] for task, values in scores.items() if split in values}


def part(scores: Scores, task: str, split: Split) -> dict[str, float]:
    """One task's metrics on one part (empty when the task was not scored)."""
    return scores.get(task, {}).get(split, {})


def flatten(scores: Scores) -> dict[str, float]:
    """``{"<part>/<task>/<metric>": value}``: the numeric scores as report metrics."""
    return {
        f"{split}/{task}/{metric}": value
        for task, values in scores.items()
        for split in SPLITS
        for metric, value in values.get(split, {}).items()
    }


def unflatten(metrics: dict, tasks: tuple[str, ...] | list[str]) -> Scores:
    """``flatten``'s inverse for the named tasks (other entries are ignored)."""
    scores: Scores = {}
    for key, value in metrics.items():
        split, _, rest = str(key).partition("/")
        task, _, metric = rest.rpartition("/")
        if split in SPLITS and task in tasks and isinstance(value, (int, float)):
            scores.setdefault(task, {}).setdefault(split, {})[metric] = float(value)
    return scores


TOTAL_SUFFIX = "_total"


def strata(part_scores: dict[str, float]) -> dict[str, dict[str, float]]:
    """One part's scores per stratum (``Outcomes.stratum_scores``): ``{label: {"main", "se", "n",
    <metric>...}}``, in the order the task gave them (length buckets, then any of its own)."""
    labels = [
        k[:-2] for k in part_scores if k.endswith("_n") and k[:-2] in part_scores and f"{k[:-2]}_se" in part_scores
    ]
    out = {}
    for label in labels:
        prefix = f"{label}_"
        extra = {
            k[len(prefix) :]: v
            for k, v in part_scores.items()
            if k.startswith(prefix)
            and k[len(prefix) :] not in ("se", "n")
            and not any(k.startswith(f"{other}_") and len(other) > len(label) for other in labels)
        }
        out[label] = {
            "main": part_scores[label],
            "se": part_scores[f"{label}_se"],
            "n": part_scores[f"{label}_n"],
            **extra,
        }
    return out


def stratum_keys(part_scores: dict[str, float]) -> set[str]:
    """Every key of one part's scores that belongs to a stratum."""
    labels = strata(part_scores)
    return {k for k in part_scores for label in labels if k == label or k.startswith(f"{label}_")}


def sizes(part_scores: dict[str, float]) -> dict[str, tuple[int, int]]:
    """``{unit: (scored, total)}`` of one part's scores (``Task.part_sizes``): documents, queries, pairs."""
    return {
        key[: -len(TOTAL_SUFFIX)]: (int(part_scores[key[: -len(TOTAL_SUFFIX)]]), int(total))
        for key, total in part_scores.items()
        if key.endswith(TOTAL_SUFFIX) and key[: -len(TOTAL_SUFFIX)] in part_scores
    }


def subsampled(part_scores: dict[str, float]) -> bool:
    """Whether the budget cut this part: fewer scored than the collection holds."""
    return any(scored < total for scored, total in sizes(part_scores).values())


def coverage(part_scores: dict[str, float]) -> str:
    """What one part scored, e.g. ``200 of 1,400 documents, 15 of 15 queries``, marked when the
    budget cut it: such a score is not comparable with one on the whole collection."""
    text = ", ".join(f"{scored:,} of {total:,} {unit}" for unit, (scored, total) in sizes(part_scores).items())
    if subsampled(part_scores):
        text += " (a subsample: not comparable with scores on the full collection)"
    return text
