"""The project's ``platform`` package must behave exactly like the stdlib module."""

from __future__ import annotations

import importlib.util
import inspect
import sysconfig

import platform as package


def _stdlib_platform():
    spec = importlib.machinery.PathFinder.find_spec("platform", [sysconfig.get_path("stdlib")])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_package_is_the_project_package():
    assert hasattr(package, "__path__")
    assert package.__file__.endswith("platform/__init__.py")
    import platform.search  # noqa: F401 - the driver stays importable


def test_every_stdlib_name_is_present():
    stdlib = _stdlib_platform()
    missing = [name for name in vars(stdlib) if not name.startswith("__") and not hasattr(package, name)]
    assert missing == []


def test_public_functions_give_the_stdlib_answers():
    stdlib = _stdlib_platform()
    no_arg = [
        "system",
        "node",
        "release",
        "version",
        "machine",
        "processor",
        "python_version",
        "python_implementation",
        "python_compiler",
        "python_build",
        "architecture",
        "uname",
        "platform",
        "python_version_tuple",
        "libc_ver",
        "python_branch",
        "python_revision",
    ]
    for name in no_arg:
        assert getattr(package, name)() == getattr(stdlib, name)(), name
    assert package.platform(aliased=True, terse=True) == stdlib.platform(aliased=True, terse=True)
    for name, value in vars(stdlib).items():
        if inspect.isfunction(value) and not name.startswith("__"):
            assert getattr(package, name).__code__.co_code == value.__code__.co_code, name


def test_heavy_libraries_import_with_the_package_in_place():
    # they imported with the project's package as `platform`, and it still answers as the stdlib does
    import sys

    import ray
    import torch
    import transformers

    assert sys.modules["platform"] is package and package.system() == _stdlib_platform().system()
    assert torch.__version__ and ray.__version__ and transformers.__version__
