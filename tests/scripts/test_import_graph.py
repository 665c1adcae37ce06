"""The layering check (scripts/import_graph.py) holds for the project and catches what it forbids."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from tests.conftest import ROOT

spec = importlib.util.spec_from_file_location("import_graph", ROOT / "scripts" / "import_graph.py")
import_graph = importlib.util.module_from_spec(spec)
spec.loader.exec_module(import_graph)


def test_the_project_keeps_its_layering():
    _, broken = import_graph.check()
    assert broken == []


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for package in import_graph.PACKAGES:
        (root / package).mkdir(exist_ok=True)
        (root / package / "__init__.py").touch()
    return root


def test_an_arrow_between_trainers_and_evaluators_is_caught_even_inside_a_function(tmp_path):
    root = _tree(
        tmp_path,
        {
            "trainers/loop.py": "def score():\n    from evaluators.pool import score_checkpoint\n",
            "evaluators/pool.py": "from doctune_core.encoder import embed\n",
            "doctune_core/encoder.py": "def embed(): ...\n",
        },
    )
    _, broken = import_graph.check(root)
    assert broken == ["trainers.loop imports evaluators.pool: trainers never imports evaluators"]


def test_a_cycle_inside_the_driver_is_caught_but_a_type_checking_import_is_not(tmp_path):
    root = _tree(
        tmp_path,
        {
            "platform/search.py": "from platform import report\nEXIT_OK = 0\n",
            "platform/report.py": "def main():\n    from platform.search import EXIT_OK\n",
            "platform/samplers.py": "import typing\nif typing.TYPE_CHECKING:\n    from platform.spec import D\n",
            "platform/spec.py": "from platform.samplers import grid\n",
        },
    )
    _, broken = import_graph.check(root)
    assert broken == [
        "platform.report imports platform.search: platform.report (floor 5) imports only the driver's floors "
        "below its own, and platform.search is on floor 7",
        "cycle in platform: platform.report <-> platform.search",
        "platform.samplers stands on no floor: place it in DRIVER_FLOORS",
    ]


def test_a_plugin_importing_the_package_that_imports_it_back_is_a_cycle(tmp_path):
    root = _tree(
        tmp_path,
        {
            "trainers/losses/__init__.py": "from trainers.losses.base import LOSSES\nimport trainers.losses.hinge\n",
            "trainers/losses/base.py": "LOSSES = {}\n",
            "trainers/losses/hinge.py": "from trainers.losses import LOSSES\ndef hinge(): ...\n",
            "trainers/pairs/__init__.py": "from trainers.pairs.base import RECIPES\n",
            "trainers/pairs/base.py": "RECIPES = {}\n",
            "trainers/pairs/swap.py": "from trainers.pairs import RECIPES\n",  # its package never imports it
        },
    )
    _, broken = import_graph.check(root)
    assert broken == ["cycle in trainers: trainers.losses <-> trainers.losses.hinge"]


def test_the_results_side_reaching_back_into_the_search_is_caught(tmp_path):
    root = _tree(
        tmp_path,
        {
            "platform/results/__init__.py": "",
            "platform/results/winner.py": "def confirm():\n    from platform.search_path.tuner import train_seeds\n",
            "platform/search_path/tuner.py": "from platform.results import winner\ndef train_seeds(): ...\n",
            "platform/search_path/resolution.py": "from platform.results.winner import confirm\n",
        },
    )
    _, broken = import_graph.check(root)
    assert broken == [
        "platform.results.winner imports platform.search_path.tuner: "
        "platform.results never imports platform.search_path.tuner",
        "platform.results.winner imports platform.search_path.tuner: platform.results (floor 4) imports only the "
        "driver's floors below its own, and platform.search_path is on floor 6",
        "platform.search_path.resolution imports platform.results.winner: "
        "platform.search_path.resolution never imports platform.results",
        "cycle in platform: platform.results.winner <-> platform.search_path.tuner",
    ]


def test_a_driver_folder_importing_a_higher_floor_and_a_long_module_are_caught(tmp_path):
    """The run directory's files import no results (a floor above), the spec no tracker; a module
    past ``MAX_LINES`` is a broken rule, not a note."""
    root = _tree(
        tmp_path,
        {
            "platform/rundir/retention.py": "from platform.results.leaderboard import rows\n",
            "platform/results/leaderboard.py": "from platform.rundir.layout import write\nrows = []\n",
            "platform/rundir/layout.py": "def write(): ...\n",
            "platform/spec/convert.py": "def trackers():\n    from platform.tracking.trackers import TRACKERS\n",
            "platform/tracking/trackers.py": "TRACKERS = {}\n" + "\n" * import_graph.MAX_LINES,
        },
    )
    _, broken = import_graph.check(root)
    assert broken == [
        "platform.rundir.retention imports platform.results.leaderboard: platform.rundir (floor 1) imports only "
        "the driver's floors below its own, and platform.results is on floor 4",
        "platform.spec.convert imports platform.tracking.trackers: platform.spec (floor 2) imports only the "
        "driver's floors below its own, and platform.tracking is on floor 3",
        f"platform/tracking/trackers.py has {import_graph.MAX_LINES + 1} lines: split it (at most 400)",
    ]
