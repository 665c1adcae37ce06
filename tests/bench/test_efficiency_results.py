"""The checked-in search-efficiency results against the code: for each checked-in table with a
stored replay (``bench/results/efficiency_*.json``), the seeds kept whole there replay on the table
to exactly what is stored, and bench/RESULTS.md quotes the stored figures, so the results, the code
and the text cannot drift apart unnoticed."""

from __future__ import annotations

import json

import pytest

from bench.efficiency import METHODS, load_table
from bench.efficiency.report import markdown
from tests.bench.tables import REPLAYED
from tests.conftest import ROOT


@pytest.fixture(scope="module", params=REPLAYED, ids=lambda path: path.stem)
def table_path(request):
    return request.param


@pytest.fixture(scope="module")
def stored(table_path) -> dict:
    return json.loads((ROOT / "bench" / "results" / f"{table_path.stem}.json").read_text())


@pytest.mark.parametrize("method", list(METHODS))
def test_the_stored_seeds_replay_to_the_stored_results(table_path, stored, method):
    table = load_table(table_path)
    samples = stored["methods"][method]["samples"]
    kept = stored["stored_seeds"][method]
    assert [entry["seed"] for entry in kept] == [0, 1, 2]
    for entry in kept:
        run = METHODS[method](table, entry["seed"], samples)
        assert (run.configs, run.rounds) == (entry["configs"], entry["rounds"]), f"seed {entry['seed']}"
        assert run.events[-1]._asdict() == entry["final"], f"seed {entry['seed']}"


def test_results_md_quotes_the_stored_results(stored):
    text = (ROOT / "bench" / "RESULTS.md").read_text()
    missing = [line for line in markdown(stored).splitlines() if line.startswith("|") and line not in text]
    assert missing == []
