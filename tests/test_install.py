"""``pip install .`` gives a ``doctune`` command that works from any directory and leaves the
standard library's ``platform`` module alone.

A fresh virtual environment with the checkout installed into it, not editable. Its dependencies
(torch, Ray, ...) are this environment's, reached through a ``.pth`` line, so the test installs
doctune itself, not gigabytes again; the ``.pth`` adds the directory only, so this environment's
editable doctune is not active there.
"""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys
import venv

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.slow  # builds a wheel, makes a venv and prepares a corpus with Ray


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """The fresh environment's bin directory, doctune installed from a wheel of the checkout."""
    where = tmp_path_factory.mktemp("install")
    wheels, env_dir = where / "wheels", where / "venv"
    build = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels)]  # setuptools from the registry
    subprocess.run([*build, str(ROOT)], check=True, capture_output=True, timeout=300)
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], capture_output=True, text=True
    ).stdout.strip()
    (env_dir / purelib / "dependencies.pth").write_text(site.getsitepackages()[0] + "\n")
    (wheel,) = wheels.glob("doctune-*.whl")
    subprocess.run([python, "-m", "pip", "install", "--no-deps", "-q", str(wheel)], check=True, timeout=300)
    return env_dir / "bin"


def _in_tmp(command: list, tmp_path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)


def test_the_installed_command_plans_the_default_search_from_any_directory(installed, tmp_path):
    done = _in_tmp([installed / "doctune", "search", "docsplit_long", "--profile", "smoke", "--dry-run"], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout[done.stdout.index("{") :])
    assert summary["run_dir"] == str(tmp_path / "runs" / "docsplit_long")  # runs/ where it was started
    assert "/site-packages/doctune/_driver/search_spaces/docsplit_long.yaml" in summary["spec"]
    assert not (tmp_path / "runs").exists()  # a dry run writes nothing


def test_the_installed_command_keeps_exit_codes_and_the_standard_platform_module(installed, tmp_path):
    bad = _in_tmp([installed / "doctune", "search", "no_such_spec"], tmp_path)
    assert bad.returncode == 2 and bad.stderr.count("doctune: error:") == 1, bad.stderr
    assert _in_tmp([installed / "doctune", "frobnicate"], tmp_path).returncode == 2
    probe = "import platform, trainers, doctune.cli; print(platform.__file__, platform.system(), trainers.__file__)"
    where = _in_tmp([installed / "python", "-c", probe], tmp_path)
    stdlib_platform, system, trainers = where.stdout.split()
    assert "site-packages" not in stdlib_platform and system == os.uname().sysname
    assert f"{installed.parent}/lib/" in trainers and "site-packages/trainers" in trainers  # the wheel's copy
