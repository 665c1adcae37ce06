"""The rows a search's trials are measured against, scored once a run and read back on a resume:
the baselines (the base encoder as given, converted, with interpolated positions: what training is
measured against) and the references (BM25, the base as its users run it: what a user already
has; ``evaluators.references``). Neither ever steers the search."""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from doctune_core.logs import progress
from platform.rundir.timings import PhaseClock

if TYPE_CHECKING:  # the search hands its plan in: the results side never imports the search's modules
    from platform.search_path.plans import ResolvedSearch

log = logging.getLogger(f"doctune.{__name__}")

BASELINES_RECORD = "baseline.json"
REFERENCES_RECORD = "references.json"


def baseline_models(resolved: ResolvedSearch) -> dict[str, tuple[str, str]]:
    """The leaderboard's baseline rows, id -> (model directory, status): the base encoder as the
    spec names it and, where the spec converts it (a Longformer backbone), the converted encoder
    before any training, so a user sees whether the whole pipeline, conversion included, helped;
    where some trial starts from interpolated positions, that start too, untrained (what such a
    trial's gain from training is measured against)."""
    from doctune_core.longformer import cached_interpolated
    from evaluators.leaderboard import BASELINE_ID, CONVERTED_BASELINE_ID, INTERPOLATED_BASELINE_ID

    rows = {BASELINE_ID: (resolved.source_model, "base model, untouched")}
    converted = resolved.train_plan.base_model
    if resolved.source_model != converted:
        rows[CONVERTED_BASELINE_ID] = (converted, "base model converted to the backbone, untrained")
    if resolved.inputs.interpolates:
        interpolated = str(cached_interpolated(resolved.train_plan.base_model))
        rows[INTERPOLATED_BASELINE_ID] = (interpolated, "base model converted, positions interpolated, untrained")
    return rows


def score_baselines(resolved: ResolvedSearch) -> dict[str, dict]:
    """Each baseline row's model, status and scores on every task (``baseline.json``)."""
    from evaluators.pool_calls import score_checkpoint

    evaluation = resolved.evaluation
    tasks = [*evaluation.tasks, *evaluation.report_tasks]
    models = baseline_models(resolved)
    return {
        row: {
            "model": model,
            "status": status,
            "scores": score_checkpoint(evaluation, model, resolved.fixed.pooling, tasks),
        }
        for row, (model, status) in progress(models.items(), len(models), "baseline rows")
    }


def search_references(resolved: ResolvedSearch) -> tuple:
    """The reference rows of a search (``evaluators.references``): the base as the spec names it,
    as its users run it (the packaged or Hub model itself, not a copy given an MLM head or converted)."""
    from doctune_core.encoder import resolve_model
    from evaluators.references import references

    return references(resolve_model(resolved.train_plan.base_model_name))


def score_references(resolved: ResolvedSearch) -> dict[str, dict]:
    """What a user already has (``search_references``: BM25, the base as its users run it), each
    row's description, model, reading and scores on every task. Never steers anything."""
    from evaluators.pool_calls import score_reference

    evaluation = resolved.evaluation
    tasks = [*evaluation.tasks, *evaluation.report_tasks]
    rows = search_references(resolved)
    return {
        reference.id: {
            "description": reference.description,
            "model": reference.model,
            "reading": dataclasses.asdict(reference.reading),
            "scores": score_reference(evaluation, reference, reference.pooling or resolved.fixed.pooling, tasks),
        }
        for reference in progress(rows, len(rows), "reference rows")
    }


def baseline_record(resolved: ResolvedSearch, clock: PhaseClock) -> dict[str, dict]:
    """The baseline rows' record (``baseline.json``): scored once per run, read back on a resume."""
    log_line = "the base model (the leaderboard's baseline rows)"
    return _scored_once(resolved, clock, BASELINES_RECORD, "baseline", log_line, score_baselines)


def reference_record(resolved: ResolvedSearch, clock: PhaseClock) -> dict[str, dict]:
    """The reference rows' record (``references.json``): scored once per run, read back on a resume."""
    log_line = "the reference rows (BM25, the base as its users run it)"
    return _scored_once(resolved, clock, REFERENCES_RECORD, "references", log_line, score_references)


def _scored_once(
    resolved: ResolvedSearch,
    clock: PhaseClock,
    record: str,
    phase: str,
    rows: str,
    score: Callable[[ResolvedSearch], dict[str, dict]],
) -> dict[str, dict]:
    """``record`` in the run directory, or ``score``'s (timed as the clock's ``phase``) where it
    is not there yet, then written there."""
    record_file = resolved.run_dir / record
    if record_file.exists():
        return json.loads(record_file.read_text())
    log.info(f"doctune: scoring {rows}")
    with clock.phase(phase):
        scored = score(resolved)
    record_file.write_text(json.dumps(scored, indent=2))
    return scored
