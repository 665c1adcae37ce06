"""Score one encoder on doctune's tasks in this process (``python -m evaluators``, ``doctune.evaluate``),
through the same ``Evaluator`` class the search's actors run."""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

from evaluators.plan import EvalBudget, EvalPlan
from evaluators.readings import ReadingCount, locked_parts, record_reading
from evaluators.references import Reading
from evaluators.tasks import UnknownTask, check_task_name
from evaluators.tasks.base import SPLITS, Split


@dataclass(frozen=True)
class Evaluation:
    """An encoder's scores: task -> part (``val``; ``test`` where asked) -> metric (``evaluators.scores``), the
    pooling it was read with, each task's scoring length in tokens, and the directory scored."""

    scores: dict[str, dict]
    pooling: str
    lengths: dict[str, int]
    model_dir: str
    # where a locked test part was read: how often its parts were read before (``evaluators.readings``)
    locked_reading: ReadingCount | None = None


def model_pooling(model_dir: str, requested: str | None = None) -> str:
    """``requested``, else the pooling a doctune export records (``doctune.json``), else mean."""
    record = Path(model_dir) / "doctune.json"
    if requested:
        return requested
    if record.exists():
        return json.loads(record.read_text()).get("pooling", "mean")
    return "mean"


def evaluate(
    model: str,
    tasks: list[str],
    pooling: str | None = None,
    max_length: int = 512,
    batch_size: int = 32,
    threads: int = 2,
    budget: EvalBudget | None = None,
    long_inputs: str | None = None,
    cache_dir: Path | None = None,
    parts: tuple[Split, ...] = ("val",),
) -> Evaluation:
    """``model`` (a directory, a packaged alias such as ``all-minilm-l6-v2``, or a Hugging Face id)
    scored on ``tasks`` (names as ``python -m evaluators --list`` shows them). ``long_inputs``:
    ``truncate`` or ``chunk`` for texts over the length, None as each task says; ``cache_dir``: the
    embedding cache (a temporary one by default); ``parts``: the parts scored, validation alone
    unless the locked test part is asked for (read it once a choice is made: it reports, never
    chooses; each reading is entered in the ledger, ``evaluators.readings``). Raises ``UnknownTask``
    for an unknown task or a model that is not found."""
    from doctune_core.encoder import ModelUnavailable, resolve_model
    from evaluators.pool import Evaluator

    if not parts or not set(parts) <= set(SPLITS):
        raise UnknownTask(f"parts {parts!r}: name val (validation) and/or test (the locked part)")
    if not tasks:
        raise UnknownTask("name at least one task (python -m evaluators --list shows them)")
    for task in tasks:
        check_task_name(task)
    try:
        model_dir = resolve_model(model)
    except ModelUnavailable as err:
        raise UnknownTask(str(err)) from None
    plan = EvalPlan(
        objectives={"objective": dict.fromkeys(tasks, 1.0)},
        actor_names=(),
        namespace="",
        max_length=max_length,
        batch_size=batch_size,
        threads=threads,
        budget=budget or EvalBudget(),
        parts=parts,
    )
    reading = Reading(long_inputs=long_inputs)
    with tempfile.TemporaryDirectory() as scratch:
        evaluator = Evaluator(plan, str(cache_dir or scratch))
        chosen = model_pooling(model_dir, pooling)
        scores = evaluator.score(model_dir, chosen, tasks, reading=reading)
        lengths = {task: evaluator.scoring_length(model_dir, task, reading) for task in tasks}
    locked = None
    if "test" in parts:  # every reading of a locked part is entered in the ledger
        locked = record_reading(locked_parts(scores), f"{model} scored on its locked test parts (python -m evaluators)")
    return Evaluation(scores, chosen, lengths, model_dir, locked)
