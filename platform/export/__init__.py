"""Exporting a trial of a finished search (``python -m platform.export RUN_DIR [--trial ID] --to DIR``,
``platform.export.cli``).

Exports one trial of a finished search: its encoder as an ordinary transformers model directory
that sentence-transformers also loads with the trial's pooling and L2 normalisation, plus
``doctune.json`` (what it is) and ``README.md`` (a model card). The search exports its winner to
``RUN_DIR/best`` with the same code (``export_best``). Exit codes: 0 success, 2 bad input (one
message naming what is wrong and how to fix it; nothing written), 1 any other failure.

The sentence-transformers files are ``platform.export.st_files``, the model card
``platform.export.model_card``, the command ``platform.export.cli``.
"""

from __future__ import annotations

import json
import logging
import shutil
from dataclasses import dataclass
from pathlib import Path

from doctune_core.run_files import RunFiles
from doctune_core.run_layout import BEST_DIR
from evaluators.leaderboard import LeaderboardRow
from platform.export.model_card import model_card
from platform.export.record import ExportError, SearchRecord
from platform.export.st_files import POOLINGS, sentence_transformers_gap, write_sentence_transformers_files
from trainers.checkpoint import recorded_checkpoint

log = logging.getLogger(f"doctune.{__name__}")


@dataclass(frozen=True)
class Exported:
    """Where an export went, and whether sentence-transformers can load it."""

    path: Path
    # why sentence-transformers cannot load this encoder as doctune embeds it; None when it can
    sentence_transformers_gap: str | None


def export_best(row: LeaderboardRow, run_dir: Path, files: RunFiles) -> Exported:
    """The search's winner to ``run_dir/best`` (replacing an earlier export there), its checkpoint read
    from the run's files (fetched for the export where they are in a storage)."""
    with files.as_local_dir(recorded_checkpoint(row.checkpoint, row.trial)) as checkpoint:
        return export_trial(row, SearchRecord.read(run_dir), run_dir / BEST_DIR, checkpoint)


def export_trial(row: LeaderboardRow, search: SearchRecord, target: Path, checkpoint: Path) -> Exported:
    """Write ``row``'s checkpoint, a directory here at ``checkpoint``, as an exported encoder at ``target``.

    Everything is written under ``<target>.partial`` and renamed at the end, so a directory named
    ``target`` is always whole; an existing ``target`` is replaced. An existing ``<target>.partial``
    is removed only when it is what an interrupted export of this same run left (it carries a
    marker naming the run directory); anything else there is refused with ``ExportError``.
    """
    source = checkpoint
    partial = target.with_name(target.name + ".partial")
    _clear_leftover(partial, search)
    try:
        partial.mkdir(parents=True)
        (partial / EXPORT_MARKER).write_text(json.dumps({"run_dir": search.run_dir, "trial": row.trial}))
        shutil.copytree(source, partial, ignore=shutil.ignore_patterns("training_state"), dirs_exist_ok=True)
        record = json.loads((partial / "doctune.json").read_text())
        record |= {
            "trial_id": row.trial,
            "objective": row.objective,
            "scores": row.scores,
            "base_model": search.base_model,
            "corpus": search.corpus,
            "spec": search.spec,
            "profile": search.profile,
            "objectives": search.objectives,
        }
        (partial / "doctune.json").write_text(json.dumps(record, indent=2, sort_keys=True))
        config = json.loads((partial / "config.json").read_text())
        gap = sentence_transformers_gap(record["pooling"], config.get("model_type", ""))
        if gap is None:
            write_sentence_transformers_files(partial, POOLINGS[record["pooling"]], config, search.max_length)
        card = model_card(row, record, search, config, target.resolve(), gap)
        (partial / "README.md").write_text(card)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    (partial / EXPORT_MARKER).unlink()
    shutil.rmtree(target, ignore_errors=True)
    partial.rename(target)
    return Exported(target, gap)


EXPORT_MARKER = ".doctune-export"  # in DIR.partial while an export writes it: whose export it is


def _clear_leftover(partial: Path, search: SearchRecord) -> None:
    if not partial.exists():
        return
    try:
        owner = json.loads((partial / EXPORT_MARKER).read_text())["run_dir"]
    except (OSError, ValueError, KeyError):
        owner = None
    if owner != search.run_dir:
        whose = f"an export of another run ({owner})" if owner else "not left by a doctune export"
        raise ExportError(f"{partial} exists and is {whose}; remove it, or export to another directory")
    log.info(f"doctune: removing {partial}, left by an interrupted export of this run")
    shutil.rmtree(partial)
