"""Plug-ins from installed packages (``core.registry.import_plugins``): an entry point in a kind's group
registers its plug-ins beside doctune's own; one that fails to load is one clear error."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import ROOT, documented_plugins, plugin_package

# what a user's code reads once the package is installed: the recipe by name, next to the built-in ones
FIND = """
from trainers.pairs import RECIPES
from trainers.settings import TrialSettings
found = sorted(name for name in RECIPES if name in ("docsplit", "shuffled"))
print(found, "shuffled_share" in TrialSettings.__dataclass_fields__)
"""


def _find(tmp_path, code: str) -> subprocess.CompletedProcess:
    """``FIND`` run with ``code``'s package installed into a directory of its own (pip's ``--target``:
    its module and its ``dist-info`` with the entry point), which ``PYTHONPATH`` puts on the path."""
    project = plugin_package(tmp_path, "shuffled_recipe", "doctune.recipes", code)
    target = tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--target", str(target)]
    subprocess.run([*pip, str(project)], check=True, capture_output=True, timeout=300)
    path = os.pathsep.join([str(ROOT), str(target)])
    env = {**os.environ, "PYTHONPATH": path}
    return subprocess.run([sys.executable, "-c", FIND], cwd=tmp_path, env=env, capture_output=True, text=True)


def test_an_installed_packages_recipe_is_found_by_its_entry_point(tmp_path):
    done = _find(tmp_path, documented_plugins()["trainers/pairs/shuffled.py"])
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["['docsplit',", "'shuffled']", "True"]  # its settings joined the trials' too


def test_a_plugin_that_fails_to_load_names_itself_and_its_package(tmp_path):
    done = _find(tmp_path, "raise RuntimeError('needs a GPU library')\n")
    assert done.returncode == 1
    assert (
        "PluginFailed: the doctune.recipes plug-in 'shuffled_recipe' = 'shuffled_recipe' (package "
        "doctune-shuffled-recipe) failed to load: RuntimeError: needs a GPU library; fix or uninstall that package"
    ) in done.stderr
