"""A run's result files (the leaderboard, the baselines' and references' records) are opened by the
results side alone (``platform/results/`` and the row model, ``evaluators/leaderboard.py``); everyone
else reads them through ``Leaderboard.read``."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import ROOT

PRODUCT = ("doctune", "platform", "trainers", "evaluators", "doctune_core")
RESULTS_SIDE = ("platform/results/", "evaluators/leaderboard.py")
# the names a run's result files go by in the code, and the files themselves
RESULT_NAMES = {"LEADERBOARD_FILE", "LEADERBOARD_CSV", "BASELINES_RECORD", "REFERENCES_RECORD"}
RESULT_FILES = {"leaderboard.json", "leaderboard.csv", "baseline.json", "references.json"}
OPENING_METHODS = {"read_text", "read_bytes", "open", "read_json", "read"}
OPENING_FUNCTIONS = {"open", "read_csv", "read_json", "load", "loads", "reader", "DictReader"}


def _names_a_result_file(node: ast.AST) -> bool:
    for part in ast.walk(node):
        if isinstance(part, ast.Name) and part.id in RESULT_NAMES:
            return True
        if isinstance(part, ast.Attribute) and part.attr in RESULT_NAMES:
            return True
        if isinstance(part, ast.Constant) and isinstance(part.value, str) and part.value in RESULT_FILES:
            return True
    return False


def result_file_openings(root: Path) -> list[str]:
    """``path:line`` of every call outside the results side that opens a run's result file: a method
    that reads a path naming one (``(run_dir / LEADERBOARD_FILE).read_text()``), or a function called
    on one (``open(...)``, ``json.load(...)``, ``pd.read_csv(...)``)."""
    found = []
    for package in PRODUCT:
        for path in sorted((root / package).rglob("*.py")):
            relative = path.relative_to(root).as_posix()
            if relative.startswith(RESULTS_SIDE):
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not isinstance(node, ast.Call):
                    continue
                func = node.func
                if isinstance(func, ast.Attribute) and func.attr in OPENING_METHODS:
                    opened = _names_a_result_file(func.value) or any(map(_names_a_result_file, node.args))
                else:
                    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                    opened = name in OPENING_FUNCTIONS and any(map(_names_a_result_file, node.args))
                if opened:
                    found.append(f"{relative}:{node.lineno}")
    return sorted(set(found))


def test_only_the_results_side_opens_a_runs_result_files():
    assert result_file_openings(ROOT) == []


def test_a_module_that_opens_the_leaderboard_itself_is_found(tmp_path):
    for package in PRODUCT:
        (tmp_path / package).mkdir()
    (tmp_path / "platform" / "results").mkdir()
    (tmp_path / "platform" / "results" / "rows.py").write_text(
        "import json\ndef read(d):\n    return json.loads((d / LEADERBOARD_FILE).read_text())\n"
    )
    (tmp_path / "platform" / "report.py").write_text(
        "import json\n"
        "def rows(d):\n"
        "    return json.loads((d / LEADERBOARD_FILE).read_text())\n"
        "def exists(d):\n"
        "    return (d / LEADERBOARD_FILE).exists()\n"  # asking whether it is there opens nothing
        "def table(d):\n"
        "    return pd.read_csv(d / 'leaderboard.csv')\n"
    )
    (tmp_path / "doctune" / "api.py").write_text("def board(d):\n    return open(d / 'leaderboard.json')\n")
    assert result_file_openings(tmp_path) == ["doctune/api.py:2", "platform/report.py:3", "platform/report.py:7"]
