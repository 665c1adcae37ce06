"""Plug-ins from installed packages (``doctune_core.registry.import_plugins``): an entry point in a kind's group
registers its plug-ins beside doctune's own; one that fails to load is one clear error."""

from __future__ import annotations

import ast
import inspect
import os
import subprocess
import sys
from pathlib import Path

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


PRODUCT_PACKAGES = ("doctune_core", "trainers", "evaluators", "platform", "doctune")


def _docstrings(tree: ast.Module) -> set[int]:
    return {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }


def test_no_module_but_a_plugins_own_names_a_registered_plugin():
    """Central code reads plug-ins through their registries and what they declare (a default, a
    setting's perturbability, the views a recipe makes), never by name: every registered recipe,
    loss, task and tracker name appears, as a string in code, only in modules that register plug-ins (its
    own, or one declared with it: DECA's recipe names its loss)."""
    from evaluators.tasks import TASKS
    from platform.tracking.trackers import TRACKERS
    from trainers.losses import CONTRASTIVE_LOSSES
    from trainers.pairs import RECIPES

    registries = (RECIPES, CONTRASTIVE_LOSSES, TASKS, TRACKERS)
    names = {name for registry in registries for name in registry}
    plugin_modules = {
        Path(inspect.getsourcefile(registry[name])).resolve() for registry in registries for name in registry
    }
    assert len(names) > 20 and len(plugin_modules) > 10  # the scan reads what is registered
    named = []
    for package in PRODUCT_PACKAGES:
        for module in sorted((ROOT / package).rglob("*.py")):
            if module.resolve() in plugin_modules:
                continue
            tree = ast.parse(module.read_text())
            docstrings = _docstrings(tree)
            named += [
                f"{module.relative_to(ROOT)}:{node.lineno} {node.value!r}"
                for node in ast.walk(tree)
                if isinstance(node, ast.Constant) and node.value in names and id(node) not in docstrings
            ]
    assert not named, "plug-in names in central code (declare it on the plug-in instead): " + ", ".join(named)
