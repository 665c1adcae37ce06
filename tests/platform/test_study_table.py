"""A study's table shows the part it was asked for: test scores (rows chosen on validation), or,
for a study that must not read the locked test parts (``--validation-only``), validation scores."""

from __future__ import annotations

import json

from platform.results.study_table import RowResult, write_table
from platform.spec import load_spec


def _scores(val: float, test: float | None) -> dict:
    parts = {"val": {"main": val, "macro_f1": val}}
    if test is not None:
        parts["test"] = {"main": test, "macro_f1": test}
    return {"r8-fewshot": parts}


def test_a_validation_only_table_shows_validation_and_says_no_test_part_was_read(tmp_path):
    spec, _ = load_spec("position_study", "smoke")
    rows = [RowResult("a", {}, {0: _scores(0.5, None), 1: _scores(0.7, None)}, {})]
    write_table(rows, [("r8-fewshot", "macro_f1")], tmp_path, spec, shown="val")
    table = (tmp_path / "study.md").read_text()
    assert "validation parts; no test part was read" in table and "| a | 2 | 0.6000 ± 0.1414 |" in table
    assert json.loads((tmp_path / "study.json").read_text())[0]["columns"]["r8-fewshot macro_f1"]["mean"] == 0.6


def test_rows_with_rounds_show_their_validation_objective_at_each_step(tmp_path):
    spec, _ = load_spec("position_study", "smoke")  # objective: needle 0.5, passkey 0.5, passages 1.0

    def objective_scores(needle: float, passkey: float, passages: float) -> dict:
        mains = {"needle-retrieval": needle, "passkey-retrieval": passkey, "news-passage-retrieval": passages}
        return {task: {"val": {"main": value}} for task, value in mains.items()}

    rounds = {
        0: {16: objective_scores(0.2, 0.4, 0.5), 32: objective_scores(0.4, 0.4, 0.6)},
        1: {16: objective_scores(0.2, 0.2, 0.5), 32: objective_scores(0.6, 0.4, 0.6)},
    }
    rows = [
        RowResult("curve", {}, {0: _scores(0.5, None), 1: _scores(0.6, None)}, {}, rounds),
        RowResult("flat", {}, {0: _scores(0.5, None)}, {}),  # one round per run: no curve
    ]
    write_table(rows, [("r8-fewshot", "macro_f1")], tmp_path, spec, shown="val")
    table = (tmp_path / "study.md").read_text()
    curves = table[table.index("learning curves") :]
    # step 16: (0.5*0.2 + 0.5*0.4 + 0.5) / 2 = 0.4 and 0.35; step 32: 0.5 and 0.55
    assert "| step 16 | step 32 |" in curves and "| curve | 0.3750 ± 0.0354 | 0.5250 ± 0.0354 |" in curves
    assert "| flat |" not in curves


def test_by_default_the_table_shows_test_scores(tmp_path):
    spec, _ = load_spec("position_study", "smoke")
    rows = [RowResult("a", {}, {0: _scores(0.5, 0.9)}, {})]
    write_table(rows, [("r8-fewshot", "macro_f1")], tmp_path, spec)
    assert "| a | 1 | 0.9000 |" in (tmp_path / "study.md").read_text()
