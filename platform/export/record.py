"""What an export reads of a finished search (``search.json``), and the error for bad export input."""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from pathlib import Path

from doctune_core.run_layout import SEARCH_RECORD
from platform.spec import SPACES_DIR


class ExportError(ValueError):
    """Bad export input (run directory, trial, target); the message says what and how to fix it."""


@dataclass(frozen=True)
class SearchRecord:
    """What an export says about the search its trial came from (read from ``search.json``)."""

    name: str
    spec: str  # the spec file the search ran
    profile: str
    base_model: str  # as the spec names it
    corpus: str
    objectives: dict[str, dict[str, float]]  # objective name -> (task -> weight); the first ranks
    searched: tuple[str, ...]  # the hyperparameters the search varied
    max_length: int  # tokens per text when the trials were scored (evaluation.max_length)
    run_dir: str = ""  # where the search's run directory was when the export was made

    @classmethod
    def read(cls, run_dir: Path) -> SearchRecord:
        summary = json.loads((run_dir / SEARCH_RECORD).read_text())
        spec = summary["resolved_spec"]
        return cls(
            run_dir=str(run_dir.resolve()),
            name=spec["name"],
            spec=summary["spec"],
            profile=summary["profile"],
            base_model=spec["base_model"],
            corpus=spec["corpus"]["source"],
            objectives=dict(spec["search"]["objective"].get("objectives") or {})
            or {"objective": dict(spec["search"]["objective"]["tasks"])},
            searched=tuple(spec["search"]["space"]),
            max_length=int(spec["evaluation"]["max_length"]),
        )

    @property
    def command(self) -> str:
        """The command that runs this search again (a spec in search_spaces/ by its name)."""
        spec = Path(self.spec)
        argument = spec.stem if spec.resolve().parent == SPACES_DIR.resolve() else str(spec)
        return f"python -m platform.search {shlex.quote(argument)} --profile {shlex.quote(self.profile)}"
