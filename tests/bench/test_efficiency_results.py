"""The checked-in search-efficiency results against the code: for each checked-in table with a
stored replay (``bench/results/efficiency_*.json``), the seeds kept whole there replay on the table
to exactly what is stored, and bench/RESULTS.md quotes the stored figures, so the results, the code
and the text cannot drift apart unnoticed."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bench.efficiency import METHODS, load_table
from bench.efficiency.report import markdown
from platform.spec import load_spec
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


def test_the_local_default_search_tries_the_validation_pick_of_the_table_at_its_scale():
    """docsplit_long's local profile tries, second, the configuration whose best validation objective
    leads the table of its recipes trained at that scale: a rebuilt table that picks another, or a
    spec edited away from it, fails here."""
    name = "efficiency_recipes_large_parts"
    table = load_table(ROOT / "bench" / "data" / f"{name}.csv")
    best = int(np.nanargmax(np.nanmax(table.val, axis=1)))
    pick = {key: table.space[key].values[i] for key, i in zip(table.space, table.grid[best], strict=True)}
    table_fixed = load_spec(str(ROOT / "bench" / f"{name}.yaml"), "local")[0].hyperparameters
    spec = load_spec("docsplit_long", "local")[0]
    start = spec.search.warm_start[1]
    assert start.keys() == {*pick, "split_probability", "elongation_max", "mlm_weight"}
    for dimension, value in {**table_fixed, **pick}.items():
        expected = pytest.approx(value, rel=0.01) if isinstance(value, float) else value
        if dimension in start:
            assert start[dimension] == expected, dimension
        else:  # trained as the table trained it
            assert spec.hyperparameters[dimension] == expected, dimension
