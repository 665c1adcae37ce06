"""Experiment trackers, one module per tracker, each registered by name in ``TRACKERS``
(``platform.tracking.base.Tracker``; the registry is the spec's, ``platform.spec.trackers``):
``mlflow_runs`` and ``wandb_runs`` here, and any installed package's, through an entry point of the
group ``doctune.trackers`` (docs/plugins.md)."""

from __future__ import annotations

from doctune_core.registry import import_plugins
from platform.spec.trackers import TRACKERS

import_plugins(__name__, __path__, "doctune.trackers")

__all__ = ["TRACKERS"]
