"""A spec's ``study:`` section: the rows a recipe study (``python -m platform.study``) trains and the
table it shows (checked with the rest of the spec: ``platform.spec.checks``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from doctune_core.fields import constraint


@dataclass(frozen=True)
class StudySection:
    """A recipe study (``python -m platform.study``): named rows of fixed hyperparameters, each
    trained once per seed from the same base, scored on the table's tasks."""

    rows: dict[str, dict[str, Any]] = field(
        metadata=constraint("row name -> its recipe and hyperparameters (a paper's defaults)")
    )
    table: dict[str, list[str]] = field(metadata=constraint("the table's columns: task -> the metrics shown"))
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2], metadata=constraint("each row trains once per seed"))
    tune_best: int = field(
        default=2, metadata=constraint("how many of the best rows (by the objective) the search then tunes", 0)
    )
    rounds: int = field(
        default=1,
        metadata=constraint(
            "scoring rounds along each row's training, evenly spaced (must divide train.steps): each round's "
            "validation scores on the objective's tasks are kept, a learning curve; the table shows the last",
            1,
        ),
    )
