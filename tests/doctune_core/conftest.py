"""Fixtures of the tests of ``doctune_core``."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def local_ray():
    """A local Ray of two CPUs for the module's tests (a corpus's preparation is a Ray Data job)."""
    import ray

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    yield
    ray.shutdown()
