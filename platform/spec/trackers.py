"""Where a spec's ``tracking:`` names are found: the trackers' registry, declared here and filled by
their package (``platform.tracking.trackers``, and an installed package's through the entry point
group ``doctune.trackers``), loaded on the first lookup. The spec reads the registry and never
imports the trackers, which import the spec."""

from __future__ import annotations

from typing import TYPE_CHECKING

from doctune_core.registry import Registry

if TYPE_CHECKING:
    from platform.tracking.base import Tracker

TRACKERS: Registry[type[Tracker]] = Registry("tracker", plugins="platform.tracking.trackers")
"""Every tracker by its name in a spec's ``tracking:``."""
