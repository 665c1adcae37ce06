"""The long-document study's column for docs/study.md, read from a study directory or its record.

    python bench/long_study_column.py [STUDY_DIR] [--part val|test]

STUDY_DIR is a run of ``python -m platform.study long_study`` (default ``runs/long_study``) or its
record in ``bench/study/long_study`` (the study's small files: ``study_spec.json``, ``base.json``,
``timings.json``, ``runs/ROW/seedN/result.json``; what the study reads to redo nothing). Prints, for
each row finished so far (the untouched base first), every table column on ``--part`` as mean ±
sample std over seeds, then the synthetic long tasks pooled (needle and passkey acc@1 over the
table's length buckets) against the base and against SimCSE with a screen: the difference of the
row means against twice its standard error, taken conservatively as the seeds' spread of both rows
plus both rows' item standard errors (the rows score the same items, so the paired error is
smaller). Rows are told apart on validation; test only reports.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from pathlib import Path

SYNTHETIC = ("needle-retrieval", "passkey-retrieval")


def _rows(study: Path) -> dict[str, list[dict]]:
    """Row -> its seeds' scores (task -> part -> metrics), the base first."""
    rows = {"base (converted, untouched)": [json.loads((study / "base.json").read_text())]}
    spec = json.loads((study / "study_spec.json").read_text())["resolved_spec"]
    for name in spec["study"]["rows"]:
        seeds = sorted((study / "runs" / name).glob("seed*/result.json"))
        results = [json.loads(path.read_text()) for path in seeds]
        if results:
            rows[name] = [r["scores"] for r in results if "scores" in r]
    return rows


def _columns(study: Path) -> list[tuple[str, str]]:
    table = json.loads((study / "study_spec.json").read_text())["resolved_spec"]["study"]["table"]
    return [(task, metric) for task, metrics in table.items() for metric in metrics]


def _value(scores: dict, task: str, part: str, metric: str) -> tuple[float, float]:
    """A column's value and its item standard error (0 where the task reports none)."""
    values = scores[task][part]
    if metric == "main" or metric not in values:
        metric = "main"
    return float(values[metric]), float(values.get(f"{metric}_se", values.get("main_se", 0.0)))


def _pooled(seeds: list[dict], columns, part: str) -> tuple[float, float, float]:
    """The synthetic columns pooled: mean over seeds, the seeds' standard error, the item standard error."""
    synthetic = [(t, m) for t, m in columns if t in SYNTHETIC]
    means, item_se = [], []
    for scores in seeds:
        pairs = [_value(scores, t, part, m) for t, m in synthetic]
        means.append(statistics.fmean(v for v, _ in pairs))
        item_se.append(math.sqrt(sum(se**2 for _, se in pairs)) / len(pairs))
    seed_se = statistics.stdev(means) / math.sqrt(len(means)) if len(means) > 1 else 0.0
    return statistics.fmean(means), seed_se, statistics.fmean(item_se)


def _cell(values: list[float]) -> str:
    if len(values) == 1:
        return f"{values[0]:.3f}"
    return f"{statistics.fmean(values):.3f} ± {statistics.stdev(values):.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("study", nargs="?", type=Path, default=Path("runs/long_study"))
    parser.add_argument("--part", choices=("val", "test"), default="val")
    args = parser.parse_args()
    rows, columns = _rows(args.study), _columns(args.study)
    header = ["row", "seeds", *(f"{t} {m}" for t, m in columns), "synthetic pooled"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    pooled = {name: _pooled(seeds, columns, args.part) for name, seeds in rows.items()}
    for name, seeds in rows.items():
        cells = [_cell([_value(s, t, args.part, m)[0] for s in seeds]) for t, m in columns]
        print(f"| {name} | {len(seeds)} | " + " | ".join(cells) + f" | {pooled[name][0]:.3f} |")
    print(f"\nsynthetic pooled on {args.part}, against the base and against SimCSE (screen: |difference| > 2 SE)")
    base = next(iter(rows))
    for name in list(rows)[1:]:
        for reference in (base, "simcse"):
            if reference == name or reference not in rows:
                continue
            mean, seed_se, item_se = pooled[name]
            ref_mean, ref_seed_se, ref_item_se = pooled[reference]
            se = math.sqrt(seed_se**2 + ref_seed_se**2 + item_se**2 + ref_item_se**2)
            verdict = "beyond the screen" if abs(mean - ref_mean) > 2 * se else "within noise"
            print(f"  {name} - {reference}: {mean - ref_mean:+.3f} (2 SE {2 * se:.3f}): {verdict}")
    timings = args.study / "timings.json"
    if timings.exists():
        record = json.loads(timings.read_text())
        spent = ", ".join(f"{row} {seconds / 60:.0f} min" for row, seconds in record["rows"].items())
        print(f"\ncost: {record['wall_seconds'] / 3600:.2f} h over {record['calls']} call(s): {spent}")


if __name__ == "__main__":
    main()
