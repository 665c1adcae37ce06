"""What the tests change in every Python process of a search they start, loaded at start-up.

A test puts this folder on the search's ``PYTHONPATH`` (``tests.conftest.patched_search_env``), which
the driver hands on to Ray's workers, and Python imports this module as each process starts. The
patches are applied to a product module as it is first imported, before any other module binds its
names; the product's code reads no switch of the tests'.

- ``DOCTUNE_TEST_NAN_AT_STEP``: a trial's loss becomes NaN at that step (``trainers.loop.train_step``),
  in trials whose id ends with ``DOCTUNE_TEST_NAN_TRIAL_SUFFIX`` where that is set.
- ``DOCTUNE_TEST_GPUS_DECLARED_ONLY``: the cluster's GPUs are declared, not present (``ray start
  --num-gpus``, an autoscaler's fake GPU nodes): a worker holding one trains on the CPU over gloo
  (``trainers.distributed``).
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import os
import sys
from collections.abc import Callable

NAN_AT_STEP = "DOCTUNE_TEST_NAN_AT_STEP"
NAN_TRIAL_SUFFIX = "DOCTUNE_TEST_NAN_TRIAL_SUFFIX"
GPUS_DECLARED_ONLY = "DOCTUNE_TEST_GPUS_DECLARED_ONLY"


def _make_the_loss_nan(loop) -> None:
    at_step, suffix = int(os.environ[NAN_AT_STEP]), os.environ.get(NAN_TRIAL_SUFFIX, "")
    train_step = loop.train_step

    def train_step_with_a_fault(trial, step, *args):
        loss, *rest = train_step(trial, step, *args)
        if step == at_step and trial.trial_id.endswith(suffix):
            loss = loss * float("nan")
        return (loss, *rest)

    loop.train_step = train_step_with_a_fault


def _train_on_the_cpu(distributed) -> None:
    import torch

    distributed.collective_backend = lambda use_gpu: "gloo"
    distributed.training_device = lambda: torch.device("cpu")


class _WhenImported(importlib.abc.MetaPathFinder):
    """Finds each module in ``patches`` as the other finders do, and patches it once it has run."""

    def __init__(self, patches: dict[str, Callable]) -> None:
        self.patches = patches

    def find_spec(self, name, path, target=None):
        if name not in self.patches:
            return None
        patch = self.patches.pop(name)
        sys.meta_path.remove(self)  # the other finders find it
        try:
            spec = importlib.util.find_spec(name)
        finally:
            if self.patches:
                sys.meta_path.insert(0, self)
        run_module = spec.loader.exec_module

        def exec_module(module) -> None:
            run_module(module)
            patch(module)

        spec.loader.exec_module = exec_module
        return spec


_patches = {}
if NAN_AT_STEP in os.environ:
    _patches["trainers.loop"] = _make_the_loss_nan
if os.environ.get(GPUS_DECLARED_ONLY) == "1":
    _patches["trainers.distributed"] = _train_on_the_cpu
if _patches:
    sys.meta_path.insert(0, _WhenImported(_patches))
