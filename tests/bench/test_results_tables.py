"""bench/RESULTS.md and the files it links under bench/: every table is its benchmark's own formatter
run on the JSON its command wrote, cell by cell (the index: ``bench.results_tables.TABLES``).

A table without a ``<!-- table: NAME -->`` marker right above it, a marker the index lacks, an entry
of the index no file shows, or a cell that differs from what the formatter makes of its file fails
here; ``python bench/results_tables.py --write`` writes them again from their files. RESULTS.md keeps
to about 700 lines of at most 110 characters.
"""

from __future__ import annotations

import pytest

from bench.results_tables import RESULTS, TABLES, cells, linked_files, tables
from tests.conftest import ROOT

MAX_LINES = 700
MAX_WIDTH = 110


def every_table() -> list[tuple]:
    return [(path, *table) for path in linked_files() for table in tables(path)]


def test_every_table_has_a_marker_and_every_marker_a_formatter():
    unnamed = [f"{path.relative_to(ROOT)}:{line}" for path, name, line, _ in every_table() if name is None]
    assert not unnamed, f"tables without a '<!-- table: NAME -->' line right above them: {unnamed}"
    named = [name for _, name, _, _ in every_table()]
    assert sorted(set(named) - set(TABLES)) == [], "tables the index (TABLES) does not list"
    assert sorted(set(TABLES) - set(named)) == [], "entries of TABLES no results file shows"
    assert len(named) == len(set(named)), "a table name shown twice"


@pytest.mark.parametrize("name", sorted(TABLES))
def test_each_table_is_its_formatter_on_its_file_cell_by_cell(name):
    (path, _, line, shown), *_ = [t for t in every_table() if t[1] == name]
    made = TABLES[name]()
    assert len(shown) == len(made), f"{path.name}:{line}: {len(shown)} lines shown, the formatter makes {len(made)}"
    for offset, (mine, theirs) in enumerate(zip(shown, made)):
        assert cells(mine) == cells(theirs), f"{path.relative_to(ROOT)}:{line + offset}"


def test_results_stay_short_and_narrow():
    lines = RESULTS.read_text().splitlines()
    assert len(lines) <= MAX_LINES, f"RESULTS.md has {len(lines)} lines (at most about {MAX_LINES})"
    wide = [n for n, text in enumerate(lines, 1) if len(text) > MAX_WIDTH]
    assert not wide, f"RESULTS.md: lines over {MAX_WIDTH} characters: {wide[:10]}"
