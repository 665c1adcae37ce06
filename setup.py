"""Packages and files of the doctune distribution (the metadata is in pyproject.toml).

The worker-side packages (doctune_core, trainers, evaluators) and the ``doctune`` command install as they
are. The driver package ``platform`` shares its name with the standard library's module, so it
installs under ``doctune/_driver/platform``, beside the shipped ``search_spaces``; only the
``doctune`` command puts that directory on ``sys.path`` (doctune/cli.py).
"""

from __future__ import annotations

from setuptools import find_packages, setup

DRIVER = "doctune._driver"
driver_packages = ["platform", *(f"platform.{name}" for name in find_packages("platform"))]
spaces = ["search_spaces", "search_spaces.profiles"]

setup(
    packages=[
        *find_packages(include=["doctune*", "trainers*", "evaluators*"]),
        *(f"{DRIVER}.{name}" for name in driver_packages + spaces),
    ],
    package_dir={f"{DRIVER}.{name}": name.replace(".", "/") for name in driver_packages + spaces},
    package_data={
        "doctune": ["py.typed"],
        "evaluators": ["py.typed"],
        "doctune_core": ["py.typed"],
        **{f"{DRIVER}.{name}": ["*.yaml"] for name in spaces},
    },
)
