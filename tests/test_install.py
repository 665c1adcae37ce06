"""An environment built from the CPU lock alone passes ``pip check``, and ``pip install .`` into it
gives a ``doctune`` command that works from any directory and leaves the standard library's
``platform`` module alone (the environment: ``installed_doctune`` in conftest).
The installed wheel also runs a real search from outside the checkout, in process through
``doctune.search``: bregman_longformer's smoke search in tests/test_search_smoke.py.
"""

from __future__ import annotations

import json
import os

import pytest

from tests.conftest import ROOT, outside_the_checkout

pytestmark = pytest.mark.ray  # builds a wheel, makes a venv from the lock and prepares a corpus with Ray


def test_the_environment_built_from_the_lock_alone_is_consistent(installed_doctune, tmp_path):
    done = outside_the_checkout([installed_doctune / "python", "-m", "pip", "check"], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    probe = "import importlib.metadata as m; print(m.version('torch'), m.version('doctune'))"
    versions = outside_the_checkout([installed_doctune / "python", "-c", probe], tmp_path).stdout.split()
    assert versions == ["2.13.0+cpu", "0.1.0"]  # the lock's CPU build, and the checkout's wheel


def test_the_installed_command_plans_the_default_search_from_any_directory(installed_doctune, tmp_path):
    done = outside_the_checkout(
        [installed_doctune / "doctune", "search", "docsplit_long", "--profile", "smoke", "--dry-run"], tmp_path
    )
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout[done.stdout.index("{") :])
    assert summary["run_dir"] == str(tmp_path / "runs" / "docsplit_long")  # runs/ where it was started
    assert "/site-packages/doctune/_driver/search_spaces/docsplit_long.yaml" in summary["spec"]
    assert not (tmp_path / "runs").exists()  # a dry run writes nothing


def test_the_installed_command_keeps_exit_codes_and_the_standard_platform_module(installed_doctune, tmp_path):
    bad = outside_the_checkout([installed_doctune / "doctune", "search", "no_such_spec"], tmp_path)
    assert bad.returncode == 2 and bad.stderr.count("doctune: error:") == 1, bad.stderr
    assert outside_the_checkout([installed_doctune / "doctune", "frobnicate"], tmp_path).returncode == 2
    probe = "import platform, trainers, doctune.cli; print(platform.__file__, platform.system(), trainers.__file__)"
    where = outside_the_checkout([installed_doctune / "python", "-c", probe], tmp_path)
    stdlib_platform, system, trainers = where.stdout.split()
    assert "site-packages" not in stdlib_platform and system == os.uname().sysname
    assert f"{installed_doctune.parent}/lib/" in trainers and "site-packages/trainers" in trainers  # the wheel's copy


def test_the_docs_example_script_type_checks_against_the_installed_wheel(installed_doctune, tmp_path):
    # the wheel ships py.typed: mypy reads doctune's own annotations (search's keyword-only parameters,
    # Leaderboard.best a LeaderboardRow), not Any; a wrong claim about them fails
    example = tmp_path / "search_from_python.py"
    example.write_text((ROOT / "docs" / "examples" / "search_from_python.py").read_text())
    mypy = [installed_doctune / "python", "-m", "mypy", "--cache-dir", str(tmp_path / "cache")]
    done = outside_the_checkout([*mypy, example.name], tmp_path)
    assert done.returncode == 0 and "Success: no issues found" in done.stdout, done.stdout + done.stderr
    wrong = tmp_path / "wrong.py"
    wrong.write_text(
        "from typing import assert_type\nimport doctune\n"
        "board = doctune.search('docsplit_long', 'smoke')\n"  # the profile is keyword-only
        "assert_type(board.best, doctune.Leaderboard)\n"
        "assert_type(board.best.objective, float)\n"
        "doctune.load_spec('docsplit_long', 'smoke')\n"  # so is load_spec's
    )
    done = outside_the_checkout([*mypy, wrong.name], tmp_path)
    assert done.returncode == 1, done.stdout
    assert done.stdout.count("Too many positional arguments") == 2, done.stdout
    assert done.stdout.count("[assert-type]") == 2, done.stdout
