"""The grid a ``grid`` search visits (``search.sampler: grid``): every ``choice`` of a dimension and
``search.grid_points`` evenly spaced points of each numeric range (geometrically for ``loguniform``).
The spec checks its size (``platform.spec.checks``); the grid sampler visits it
(``platform.strategies.samplers``)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from platform.spec.schema import Distribution


def grid_values(dist: Distribution, points: int) -> list:
    """The grid one searched dimension contributes: every choice, or ``points`` values spread over
    the range (every integer when the range holds no more than ``points``)."""
    if dist.kind == "choice":
        return list(dist.values)
    low, high = dist.values
    if dist.kind == "int":
        if high - low + 1 <= points:
            return list(range(low, high + 1))
        return sorted({round(float(v)) for v in np.linspace(low, high, points)})
    spread = np.geomspace if dist.kind == "loguniform" else np.linspace
    return [float(v) for v in spread(low, high, points)]


def grid_space(space: dict[str, Distribution], points: int) -> dict[str, list]:
    return {name: grid_values(dist, points) for name, dist in space.items()}


def grid_size(space: dict[str, Distribution], points: int) -> int:
    return math.prod(len(values) for values in grid_space(space, points).values())
