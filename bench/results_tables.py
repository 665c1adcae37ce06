"""The index of every table bench/RESULTS.md and the files it links show, each made by its benchmark's
own formatter from the file its command wrote; and the command that writes them into those files.

    .venv/bin/python bench/results_tables.py [--write]

Each table is introduced by a marker line, ``<!-- table: NAME -->``, directly above it; ``TABLES``
maps each name to its formatter and the file it reads. Without ``--write`` the command lists the
tables that differ from what their formatter makes; with it, it writes each one in place (the prose
around them is the author's). ``tests/bench/test_results_tables.py`` fails on a table without a
marker, a marker ``TABLES`` lacks, an entry no file shows, or a cell that differs.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))

BENCH = ROOT / "bench"
RESULTS = BENCH / "RESULTS.md"
MARKER = re.compile(r"^<!-- table: ([\w./-]+) -->$")
CALIBRATION = ("gain_calibration_local.json", "gain_calibration_full.json")  # the paired interval's, by profile
POSITION_AGAINST = ["base (converted, untouched)", "all, copied"]


def _json(name: str) -> dict:
    return json.loads((BENCH / "results" / name).read_text())


def _rows_of(*names: str) -> dict:
    """Several results files' rows as one record (a calibration kept in a file per profile)."""
    return {"rows": [row for name in names for row in _json(name)["rows"]]}


def _made(module: str, formatter: str, *args) -> Callable[[], list[str]]:
    """A table: ``bench.<module>.<formatter>(*args)``, each argument a results file's name (read as
    JSON), a ``Path`` (a study's record) or a value; a callable argument is called first. The
    benchmark's own directory is on the path while it is imported (some import their neighbours,
    bench/child.py, by name, as a script run from there does)."""

    def made() -> list[str]:
        from importlib import import_module

        values = [a() if callable(a) else _json(a) if isinstance(a, str) and a.endswith(".json") else a for a in args]
        sys.path.insert(0, str(BENCH))  # a script importing its neighbours (bench/child.py) by name
        try:
            return getattr(import_module(f"bench.{module}"), formatter)(*values)
        finally:
            sys.path.remove(str(BENCH))

    return made


GAINS = ("long tasks pooled", "objective", "r8-fewshot", "news-title-retrieval")
STUDIES = {"frontier_gains.json": "training_frontier", "dropout_temperature_gains.json": "dropout_temperature"}
STUDIES |= {"weight_merge_gains.json": "weight_merge", "view_frontier_gains.json": "view_frontier"}
EFFICIENCY = ("efficiency_docsplit", "efficiency_recipes", "efficiency_recipes_large_parts")
LONG = "long_document_tasks.json"

# every table the results show: its name (the marker's) -> its formatter on the file its command wrote
TABLES: dict[str, Callable[[], list[str]]] = {
    "gain-intervals/methods": _made("gain_calibration", "method_table", lambda: _rows_of(*CALIBRATION)),
    "gain-intervals/coverage": _made("gain_calibration", "coverage_table", lambda: _rows_of(*CALIBRATION)),
    "seed-mean/summary": _made("seed_mean_calibration", "summary_table", "seed_mean_calibration.json"),
    "seed-mean/coverage": _made("seed_mean_calibration", "coverage_table", "seed_mean_calibration.json"),
    "probe-draws": _made("probe_draws", "coverage_table", "probe_draws.json"),
    "ranking-check": _made("verdict_calibration", "calls_table", "verdict_calibration.json"),
    "part-sizes": _made("ranking_noise", "noise_table", "ranking_noise.json"),
    "long-documents/passage": _made("long_document_tasks", "passage_table", "long_document_tasks.json"),
    "long-documents/gains": _made("long_document_tasks", "gains_table", "long_document_tasks.json"),
    "long-documents/needle": _made(
        "long_document_tasks", "synthetic_table", "long_document_tasks.json", "needle-retrieval"
    ),
    "long-documents/passkey": _made(
        "long_document_tasks", "synthetic_table", "long_document_tasks.json", "passkey-retrieval"
    ),
    "training_frontier/rounds": _made("long_study_column", "rounds_table", BENCH / "study" / "training_frontier"),
    "training_frontier/screen": _made("long_study_column", "curves_table", BENCH / "study" / "training_frontier"),
    "position_study/rows": _made("long_study_column", "study_table", BENCH / "study" / "position_study"),
    "position_study/long-screen": _made(
        "long_study_column", "screen_table", BENCH / "study" / "position_study", POSITION_AGAINST, "val", "long tasks"
    ),
    "wall-time/runs": _made("search_wall_time", "runs_table", "search_wall_time.json"),
    "wall-time/phases": _made("search_wall_time", "phases_table", "search_wall_time.json"),
    "suite-time": _made("suite_time", "steps_table", "suite_time.json"),
    "view-signal": _made("view_signal", "signal_table", "view_signal.json"),
    "view_frontier/geometry": _made("frontier_gains", "geometry_table", "view_frontier_gains.json"),
    "view_frontier/cost": _made("frontier_gains", "cost_table", "view_frontier_gains.json"),
    "mlm-head": _made("mlm_head_training", "cost_table", "mlm_head_training.json"),
    "mlm-gradient-share": _made("mlm_gradient_share", "share_table", "mlm_gradient_share.json"),
    **{
        f"{STUDIES[name]}/{group.split(' ')[0]}": _made("frontier_gains", "gains_table", name, group)
        for name in STUDIES
        for group in GAINS
    },
    **{f"{name}/compute": _made("efficiency.report", "compute_table", f"{name}.json") for name in EFFICIENCY},
    **{f"{name}/end-points": _made("efficiency.report", "end_points_table", f"{name}.json") for name in EFFICIENCY},
    **{f"{name}/spread": _made("efficiency.report", "spread_table", f"{name}.json") for name in EFFICIENCY},
    **{f"{name}/spearman": _made("efficiency.report", "spearman_table", f"{name}.json") for name in EFFICIENCY},
}


def linked_files() -> list[Path]:
    """RESULTS.md and the Markdown files under bench/ it links to."""
    links = re.findall(r"\]\(([^)#]+\.md)\)", RESULTS.read_text())
    return [RESULTS, *sorted({(RESULTS.parent / link).resolve() for link in links if not link.startswith("http")})]


def tables(path: Path) -> list[tuple[str | None, int, list[str]]]:
    """Every table of ``path``: the name its marker gives (None: no marker right above it), its first
    line's number, and its lines."""
    found, lines = [], path.read_text().splitlines()
    i = 0
    while i < len(lines):
        if not lines[i].startswith("|"):
            i += 1
            continue
        start = i
        while i < len(lines) and lines[i].startswith("|"):
            i += 1
        marker = MARKER.match(lines[start - 1]) if start else None
        found.append((marker.group(1) if marker else None, start + 1, lines[start:i]))
    return found


def cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def write(path: Path) -> list[str]:
    """Every marked table of ``path`` made again by its formatter, in place; the names that changed."""
    lines, changed, out, i = path.read_text().splitlines(), [], [], 0
    while i < len(lines):
        out.append(lines[i])
        marker = MARKER.match(lines[i])
        i += 1
        if marker and marker.group(1) in TABLES:
            start = i
            while i < len(lines) and lines[i].startswith("|"):
                i += 1
            made = TABLES[marker.group(1)]()
            if [cells(line) for line in lines[start:i]] != [cells(line) for line in made]:
                changed.append(marker.group(1))
            out += made
    path.write_text("\n".join(out) + "\n")
    return changed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="write every marked table from its formatter")
    args = parser.parse_args()
    differ = []
    for path in linked_files():
        if args.write:
            differ += write(path)
        else:
            differ += [name for name, _, shown in tables(path) if name in TABLES and shown != TABLES[name]()]
    print(("written: " if args.write else "differ: ") + (", ".join(differ) or "none"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
