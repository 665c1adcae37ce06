"""The run directory's file names are spelled in one place (``doctune_core.run_layout``): every other
product module names them through its constants, so a renamed record is one edit."""

from __future__ import annotations

import ast
from pathlib import Path

from doctune_core import run_layout
from tests.conftest import ROOT

PRODUCT = ("doctune", "doctune_core", "evaluators", "platform", "trainers")
NAMES = (
    run_layout.SEARCH_RECORD,
    run_layout.LEADERBOARD_FILE,
    run_layout.LEADERBOARD_CSV,
    run_layout.REPORT_FILE,
    run_layout.TIMINGS_FILE,
    run_layout.OPTUNA_JOURNAL,
)


def _docstrings(tree: ast.Module) -> set[int]:
    nodes = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, nodes) and node.body and isinstance(node.body[0], ast.Expr)
    }


def spelled(root: Path = ROOT) -> list[str]:
    """Every string in product code (docstrings aside: prose) holding one of the run's file names."""
    found = []
    for package in PRODUCT:
        for path in sorted((root / package).rglob("*.py")):
            if path == root / "doctune_core" / "run_layout.py":
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            prose = _docstrings(tree)
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose:
                    found += [f"{path.relative_to(root)}:{node.lineno} {n}" for n in NAMES if n in node.value]
    return found


def test_the_run_directorys_file_names_are_spelled_in_run_layout_alone(tmp_path):
    assert not spelled(), spelled()
    # and the check finds one spelled elsewhere
    (tmp_path / "platform").mkdir()
    (tmp_path / "platform" / "reader.py").write_text('BOARD = "leaderboard.json"\n')
    assert spelled(tmp_path) == ["platform/reader.py:1 leaderboard.json"]
