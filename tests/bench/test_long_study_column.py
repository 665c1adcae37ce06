"""The long studies' reader (bench/long_study_column.py): a study's learning curves (``--rounds``),
each round's pooled long tasks against the row's own untrained start, read from a study directory."""

from __future__ import annotations

import json
import sys

from bench import long_study_column

WEIGHTS = {"needle-retrieval": 0.5, "passkey-retrieval": 0.5, "news-passage-retrieval": 1.0, "r8-fewshot": 1.0}


def _scores(long: float, se: float = 0.01) -> dict:
    """Every objective task at ``long`` on validation (R8 at 0.9: a short task, left out of the pool)."""
    scores = {task: {"val": {"main": long, "main_se": se}} for task in WEIGHTS}
    scores["r8-fewshot"] = {"val": {"main": 0.9, "main_se": se}}
    return scores


def _study(tmp_path, seeds: dict[int, dict[int, float]]):
    spec = {
        "search": {"objective": {"tasks": WEIGHTS}},
        "hyperparameters": {},
        "study": {"rows": {"positions, interpolated": {"position_init": "interpolate"}}, "table": {}},
    }
    (tmp_path / "study_spec.json").write_text(json.dumps({"resolved_spec": spec}))
    (tmp_path / "base.json").write_text(json.dumps(_scores(0.1)))
    (tmp_path / "base_interpolated.json").write_text(json.dumps(_scores(0.2)))
    for seed, curve in seeds.items():
        result = tmp_path / "runs" / "positions, interpolated" / f"seed{seed}" / "result.json"
        result.parent.mkdir(parents=True)
        rounds = {str(step): _scores(value) for step, value in curve.items()}
        result.write_text(json.dumps({"hyperparameters": {}, "scores": rounds[str(max(curve))], "rounds": rounds}))
    return tmp_path


def test_each_round_is_read_against_the_rows_own_start_with_the_seeds_spread(tmp_path, monkeypatch, capsys):
    study = _study(tmp_path, {0: {16: 0.21, 32: 0.40}, 1: {16: 0.23, 32: 0.44}, 2: {16: 0.19, 32: 0.42}})
    monkeypatch.setattr(sys, "argv", ["long_study_column.py", str(study), "--rounds"])
    long_study_column.main()
    out = capsys.readouterr().out
    # against the interpolated start (0.2), not the copied base (0.1); the short task left out of the pool.
    # Step 16: a gain of 0.01; 2 SE = 2 * sqrt((0.02 / sqrt 3)^2 + 2 * 0.0061^2) = 0.029, each side's
    # pooled item error sqrt((0.5 * 0.01)^2 + (0.5 * 0.01)^2 + 0.01^2) / 2 = 0.0061
    assert "| positions, interpolated | 16 | 0.210 ± 0.020 | 0.200 | +0.010 | 0.029 | within noise |" in out
    assert "| positions, interpolated | 32 | 0.420 ± 0.020 | 0.200 | +0.220 | 0.029 | beyond the screen |" in out
