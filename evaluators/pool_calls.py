"""Calls into the evaluator pool (``evaluators.pool``) from any process of the cluster: each finds one
of the pool's actors by its name (``EvalPlan.actor_names``), sends it the model's files or the
reference, and retries on another actor if that one dies mid-call."""

from __future__ import annotations

import zlib

from doctune_core.model_files import ModelFiles
from doctune_core.run_files import RunFiles
from evaluators.plan import EvalPlan
from evaluators.references import AS_TASKS_SAY, Reference

MAX_ATTEMPTS = 3


class CheckpointMissing(FileNotFoundError):
    """The checkpoint to score was deleted before its turn came."""

    @classmethod
    def of(cls, model_dir: str) -> CheckpointMissing:
        return cls(f"checkpoint {model_dir} no longer exists; it cannot be scored")


def model_files(model_dir: str | ModelFiles, name: str | None = None) -> ModelFiles:
    """The encoder in ``model_dir`` as files to send to an actor (``CheckpointMissing`` if it is gone),
    or the files already read; ``name``: the path it goes by, if not ``model_dir`` (``ModelFiles.read``)."""
    if isinstance(model_dir, ModelFiles):
        return model_dir
    try:
        return ModelFiles.read(model_dir, name)
    except FileNotFoundError:
        raise CheckpointMissing.of(model_dir) from None


def stored_model(files: RunFiles, checkpoint: str) -> str | ModelFiles:
    """What the pool is sent to score ``checkpoint`` (a path on the run's file system, as a leaderboard
    row names it): the path itself where the run is on this machine or the model lies outside the
    run (a baseline's), else its encoder files read from the run's storage."""
    relative = files.relative(checkpoint)
    if files.local or relative is None:
        return checkpoint
    try:
        return ModelFiles.read_from(files, relative)
    except FileNotFoundError:
        raise CheckpointMissing.of(checkpoint) from None


def score_checkpoint(
    plan: EvalPlan,
    model_dir: str | ModelFiles,
    pooling: str,
    task_names: list[str] | None = None,
    name: str | None = None,
) -> dict:
    """Score ``model_dir`` (or its files, read already) on ``plan.parts`` on one of the pool's actors
    (chosen by the path it goes by, ``name`` if given), retrying on another actor if that one dies
    mid-call."""
    files = model_files(model_dir, name)
    return _call_pool(plan, files.name, "score", files, pooling, task_names, AS_TASKS_SAY, plan.parts)


def score_reference(plan: EvalPlan, reference: Reference, pooling: str, task_names: list[str]) -> dict:
    """A reference row's scores (``Evaluator.reference_scores``), from the pool."""
    return _call_pool(plan, reference.id, "reference_scores", reference, pooling, task_names)


def reference_outcomes(plan: EvalPlan, reference: Reference, pooling: str, task_names: list[str], split: str = "test"):
    """A reference row's item-level ``Outcomes`` on one part, from the pool."""
    return _call_pool(plan, reference.id, "reference_outcomes", reference, pooling, task_names, split)


def checkpoint_outcomes(
    plan: EvalPlan, model_dir: str | ModelFiles, pooling: str, task_names: list[str], split: str = "test"
):
    """Each task's item-level ``Outcomes`` for ``model_dir`` (or its files) on one part, from the pool."""
    files = model_files(model_dir)
    return _call_pool(plan, files.name, "outcomes", files, pooling, task_names, split)


def checkpoint_start_cosine(
    plan: EvalPlan, model_dir: str | ModelFiles, start_dir: str, pooling: str, task_names: list[str]
) -> dict[str, float]:
    """``Evaluator.start_cosine`` of ``model_dir`` (or its files) against ``start_dir``, from the pool."""
    files = model_files(model_dir)
    return _call_pool(plan, files.name, "start_cosine", files, model_files(start_dir), pooling, task_names)


def _call_pool(plan: EvalPlan, what: str, method: str, *args):
    """``method(*args)`` on one of the pool's actors (chosen by ``what``, the model or reference
    scored), retrying on another actor if that one dies mid-call."""
    import ray
    from ray.exceptions import RayActorError

    first = zlib.crc32(what.encode()) % len(plan.actor_names)
    error: Exception | None = None
    for attempt in range(MAX_ATTEMPTS):
        name = plan.actor_names[(first + attempt) % len(plan.actor_names)]
        try:
            actor = ray.get_actor(name, namespace=plan.namespace)
            return ray.get(getattr(actor, method).remote(*args))
        except (RayActorError, ValueError) as err:  # ValueError: actor not (yet) registered by name
            error = err
    raise RuntimeError(f"evaluation of {what} failed {MAX_ATTEMPTS} times: {error}")
