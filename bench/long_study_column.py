"""The long-document studies' tables, read from a study directory or its record.

    python bench/long_study_column.py [STUDY_DIR] [--part val|test] [--against ROW ...]
    python bench/long_study_column.py STUDY_DIR --record bench/study/long_study
    python bench/long_study_column.py STUDY_DIR --rounds

STUDY_DIR is a run of ``python -m platform.study long_study`` (default ``runs/long_study``) or of
``position_study``, or its record in ``bench/study/``. ``--record`` writes the record: the study's
small files (``study_spec.json``, ``base.json``, ``base_interpolated.json``, ``timings.json``,
``runs/ROW/seedN/result.json``; what the study
reads to redo nothing) with every test part's scores left out, since no benchmark file may hold a
score on a locked test part (tests/bench/test_locked_parts.py): the record has validation, and
``--part test`` reads a study directory. A study started again from its record trains no finished
row again, and its table has no test scores for those rows. Prints, for
each row finished so far (the untouched base first), every table column on ``--part`` as mean ±
sample std over seeds, then the synthetic long tasks pooled (needle and passkey acc@1 over the
table's length buckets) against the ``--against`` rows (the base and SimCSE by default; a row that
starts from interpolated positions against the untrained base so started too) with a screen: the
difference of the
row means against twice its standard error, taken conservatively as the seeds' spread of both rows
plus both rows' item standard errors (the rows score the same items, so the paired error is
smaller). Rows are told apart on validation; test only reports.

``--rounds`` reads a study run with ``study.rounds`` (its rounds score the objective's tasks on
validation): each row's learning curve, the objective's long-document tasks pooled with their
objective weights (main scores) at every round's step, against the row's own untrained start, with
the same screen.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from pathlib import Path

SYNTHETIC = ("needle-retrieval", "passkey-retrieval")
BASE = "base (converted, untouched)"
INTERPOLATED_BASE = "base (converted, positions interpolated, untouched)"
SHOWN = {BASE: "base, copied", INTERPOLATED_BASE: "base, interpolated"}  # the untrained starts in a table


def _rows(study: Path) -> dict[str, list[dict]]:
    """Row -> its seeds' scores (task -> part -> metrics), the bases first."""
    rows = {BASE: [json.loads((study / "base.json").read_text())]}
    if (study / "base_interpolated.json").exists():
        rows[INTERPOLATED_BASE] = [json.loads((study / "base_interpolated.json").read_text())]
    spec = json.loads((study / "study_spec.json").read_text())["resolved_spec"]
    for name in spec["study"]["rows"]:
        seeds = sorted((study / "runs" / name).glob("seed*/result.json"))
        results = [json.loads(path.read_text()) for path in seeds]
        if results:
            rows[name] = [r["scores"] for r in results if "scores" in r]
    return rows


def _interpolated_rows(study: Path) -> set[str]:
    """The rows that start from interpolated positions (``position_init: interpolate``)."""
    spec = json.loads((study / "study_spec.json").read_text())["resolved_spec"]
    fixed = spec["hyperparameters"].get("position_init", "copy")
    return {name for name, row in spec["study"]["rows"].items() if row.get("position_init", fixed) == "interpolate"}


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
    runs = []
    for scores in seeds:
        pairs = [_value(scores, t, part, m) for t, m in synthetic]
        runs.append((statistics.fmean(v for v, _ in pairs), math.sqrt(sum(se**2 for _, se in pairs)) / len(pairs)))
    return _seeds_pooled(runs)


def _seeds_pooled(runs: list[tuple[float, float]]) -> tuple[float, float, float]:
    """Runs' (value, item standard error): their mean, the seeds' standard error, the mean item one."""
    values = [v for v, _ in runs]
    seed_se = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else 0.0
    return statistics.fmean(values), seed_se, statistics.fmean(se for _, se in runs)


def _long_weights(study: Path) -> dict[str, float]:
    """The objective's long-document tasks (``TaskMetadata.long_documents``) with their weights."""
    from evaluators.tasks import task_class

    weights = json.loads((study / "study_spec.json").read_text())["resolved_spec"]["search"]["objective"]["tasks"]
    return {task: w for task, w in weights.items() if task_class(task).metadata.long_documents}


def _pooled_long(scores: dict, weights: dict[str, float], part: str = "val") -> tuple[float, float]:
    """One run's long tasks pooled with their weights on ``part``: value and item standard error."""
    total = sum(weights.values())
    pairs = [_value(scores, task, part, "main") for task in weights]
    value = sum(w * v for w, (v, _) in zip(weights.values(), pairs)) / total
    return value, math.sqrt(sum((w * se) ** 2 for w, (_, se) in zip(weights.values(), pairs))) / total


def curves_table(study: Path) -> list[str]:
    """Each row's long tasks pooled at every round (--rounds), mean ± sd over seeds, against its own
    untrained start, with the screen (|difference| > 2 SE: the seeds' and both rows' item errors)."""
    from bench.markdown import table

    weights = _long_weights(study)
    rows, interpolated = _rows(study), _interpolated_rows(study)
    lines = []
    for name in json.loads((study / "study_spec.json").read_text())["resolved_spec"]["study"]["rows"]:
        results = [json.loads(p.read_text()) for p in sorted((study / "runs" / name).glob("seed*/result.json"))]
        curves = [{int(step): scores for step, scores in r["rounds"].items()} for r in results if "rounds" in r]
        start = INTERPOLATED_BASE if name in interpolated else BASE
        start_value, start_se = _pooled_long(rows[start][0], weights)
        for step in sorted({step for curve in curves for step in curve}):
            pooled = [_pooled_long(curve[step], weights) for curve in curves if step in curve]
            values = [v for v, _ in pooled]
            seed_se = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else 0.0
            se = math.sqrt(seed_se**2 + statistics.fmean(s for _, s in pooled) ** 2 + start_se**2)
            gain = statistics.fmean(values) - start_value
            verdict = "beyond the screen" if abs(gain) > 2 * se else "within noise"
            lines.append(
                [name, str(step), _cell(values), f"{start_value:.3f}", f"{gain:+.3f}", f"{2 * se:.3f}", verdict]
            )
    header = ["row", "step", "long tasks pooled", "its start", "gain", "2 SE", "screen"]
    return table(header, lines, numeric=(1, 3, 4, 5))


def rounds_table(study: Path) -> list[str]:
    """Each seed's validation scores at every round (--rounds: the objective, the long tasks pooled
    with their objective weights, each objective task), the untrained start first."""
    from bench.markdown import table

    spec = json.loads((study / "study_spec.json").read_text())["resolved_spec"]
    objective, weights = spec["search"]["objective"]["tasks"], _long_weights(study)

    def values(scores: dict) -> list[float]:
        total = sum(objective.values())
        main = {task: float(scores[task]["val"]["main"]) for task in objective}
        return [
            sum(w * main[t] for t, w in objective.items()) / total,
            _pooled_long(scores, weights)[0],
            *main.values(),
        ]

    lines = [[BASE, *(f"{v:.3f}" for v in values(_rows(study)[BASE][0]))]]
    for name in spec["study"]["rows"]:
        for path in sorted((study / "runs" / name).glob("seed*/result.json")):
            rounds = json.loads(path.read_text())["rounds"]
            by_round = [values(rounds[step]) for step in sorted(rounds, key=int)]
            seed = path.parent.name.removeprefix("seed")
            lines.append([f"{name}, {seed}", *(" ".join(f"{v:.3f}"[1:] for v in column) for column in zip(*by_round))])
    return table(["row, seed", "objective", "long tasks pooled", *objective], lines)


def study_table(study: Path, part: str = "val") -> list[str]:
    """Every row finished so far (the bases first): each table column on ``part`` as mean ± sample
    std over seeds, the synthetic tasks pooled, and the objective's long tasks pooled."""
    from bench.markdown import table

    rows, columns, weights = _rows(study), _columns(study), _long_weights(study)
    lines = []
    for name, seeds in rows.items():
        cells = [_cell([_value(s, t, part, m)[0] for s in seeds]) for t, m in columns]
        pooled = _pooled(seeds, columns, part)[0]
        lines.append(
            [name, str(len(seeds)), *cells, f"{pooled:.3f}", _cell([_pooled_long(s, weights, part)[0] for s in seeds])]
        )
    header = ["row", "seeds", *(f"{t} {m}" for t, m in columns), "synthetic pooled", "long tasks pooled"]
    return table(header, lines)


def screen_table(study: Path, against: list[str], part: str = "val", pooled_by: str = "synthetic") -> list[str]:
    """Each row's synthetic tasks pooled (``pooled_by``: or the objective's long tasks pooled with
    their weights) against ``against`` (a row that starts from interpolated positions against its own
    untrained start too), with the screen: |difference| > 2 SE, the SE conservatively the seeds'
    spread of both rows plus both rows' item errors (unpaired)."""
    from bench.markdown import table

    rows, columns, interpolated = _rows(study), _columns(study), _interpolated_rows(study)
    if pooled_by == "synthetic":
        pooled = {name: _pooled(seeds, columns, part) for name, seeds in rows.items()}
    else:
        weights = _long_weights(study)
        pooled = {name: _seeds_pooled([_pooled_long(s, weights, part) for s in seeds]) for name, seeds in rows.items()}
    lines = []
    for name in list(rows)[1:]:
        own_start = [INTERPOLATED_BASE] if name in interpolated else []
        for reference in dict.fromkeys([*own_start, *against]):
            if reference == name or reference not in rows:
                continue
            mean, seed_se, item_se = pooled[name]
            ref_mean, ref_seed_se, ref_item_se = pooled[reference]
            se = math.sqrt(seed_se**2 + ref_seed_se**2 + item_se**2 + ref_item_se**2)
            verdict = "beyond the screen" if abs(mean - ref_mean) > 2 * se else "within noise"
            shown = [SHOWN.get(name, name), SHOWN.get(reference, reference)]
            lines.append([*shown, f"{mean - ref_mean:+.3f}", f"{2 * se:.3f}", verdict])
    return table(["row", "against", f"{pooled_by} pooled", "2 SE", "screen"], lines, numeric=(2, 3))


def _without_test_parts(value):
    """``value`` (a JSON document of scores) with every test part (a ``test`` entry) left out."""
    if isinstance(value, dict):
        return {k: _without_test_parts(v) for k, v in value.items() if k != "test"}
    if isinstance(value, list):
        return [_without_test_parts(v) for v in value]
    return value


def write_record(study: Path, destination: Path) -> int:
    """Write ``study``'s record to ``destination`` (its small files, test parts left out); the count."""
    seeds = [path.relative_to(study) for path in study.glob("runs/*/seed*/result.json")]
    written = 0
    small = [Path("study_spec.json"), Path("base.json"), Path("base_interpolated.json"), Path("timings.json")]
    for relative in [*small, *seeds]:
        if (study / relative).exists():
            document = _without_test_parts(json.loads((study / relative).read_text()))
            (destination / relative).parent.mkdir(parents=True, exist_ok=True)
            (destination / relative).write_text(json.dumps(document, indent=2) + "\n")
            written += 1
    return written


def _cell(values: list[float]) -> str:
    if len(values) == 1:
        return f"{values[0]:.3f}"
    return f"{statistics.fmean(values):.3f} ± {statistics.stdev(values):.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("study", nargs="?", type=Path, default=Path("runs/long_study"))
    parser.add_argument("--part", choices=("val", "test"), default="val")
    parser.add_argument("--record", type=Path, metavar="DIR", help="write the study's record to DIR, and stop")
    parser.add_argument("--against", nargs="+", default=[BASE, "simcse"], help="rows every row is compared with")
    parser.add_argument("--rounds", action="store_true", help="the rows' learning curves (a study with study.rounds)")
    args = parser.parse_args()
    if args.record:
        print(f"{write_record(args.study, args.record)} file(s) recorded in {args.record}")
        return
    if args.rounds:
        print("\n".join(rounds_table(args.study)) + "\n")
        print("\n".join(curves_table(args.study)))
        return
    rows, columns = _rows(args.study), _columns(args.study)
    if any(args.part not in scores[task] for seeds in rows.values() for scores in seeds for task, _ in columns):
        parser.error(f"{args.study} holds no {args.part} scores for some rows (a record holds validation only)")
    print("\n".join(study_table(args.study, args.part)) + "\n")
    print("\n".join(screen_table(args.study, args.against, args.part)) + "\n")
    print("\n".join(screen_table(args.study, args.against, args.part, pooled_by="long tasks")))
    timings = args.study / "timings.json"
    if timings.exists():
        record = json.loads(timings.read_text())
        spent = ", ".join(f"{row} {seconds / 60:.0f} min" for row, seconds in record["rows"].items())
        print(f"\ncost: {record['wall_seconds'] / 3600:.2f} h over {record['calls']} call(s): {spent}")


if __name__ == "__main__":
    main()
