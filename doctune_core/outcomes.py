"""One encoder's results on one part of a task, item by item (``Outcomes``): what a task's scoring
hands over, and what every standard error, gain and spread is computed from (``doctune_core.noise``).
Here, below both, because the evaluators make them and the results side reads them."""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

BOOTSTRAP_ROUNDS = 200  # resamples behind a bootstrap standard error


@dataclass
class Outcomes:
    """One encoder's results on one part of a task, item by item, so that any score can carry its
    noise and two encoders can be compared on the same items (``doctune_core.noise``).

    ``items`` has one row per scored item (a query, a test document, a pair); ``statistic`` maps
    any selection of rows (a bootstrap resample) to the main score, so ``statistic(items)`` is the
    main score itself. Where the task fits one classifier per seeded draw (few-shot probes),
    ``draws`` holds each draw's main score and ``draw_width`` says how ``items`` holds them: the
    truth in its first ``draw_width`` columns, then one block of ``draw_width`` columns per draw, so
    a resample may pick draws as well as rows (``value``).
    """

    scores: dict[str, float]
    items: np.ndarray
    statistic: Callable[[np.ndarray], float]
    draws: np.ndarray | None = field(default=None)
    draw_width: int = 0
    # what each row is (a query id, a test document's index): encoders are compared on the same ids
    ids: tuple[str, ...] = ()
    # rows by a property of the item, scored on their own (a retrieval task's rows by the length of
    # the document they must find: ``evaluators.lengths``); label -> row indices
    strata: dict[str, np.ndarray] = field(default_factory=dict)
    # other per-row metrics shown per stratum beside the main score (a mean over its rows)
    per_item: dict[str, np.ndarray] = field(default_factory=dict)
    # each row's main score is 0 or 1 (acc@1, a pair judged right) and the main score their mean:
    # a gain's interval treats the part as paired proportions (``doctune_core.noise``)
    binary: bool = False
    # for a main score that is not a mean over rows (macro-F1): each row's influence on it, ``(n,)``
    # from ``items`` (the delta method: the score moves by about their mean), so its item variance
    # needs no resampling; None: ``doctune_core.noise`` resamples the rows instead
    influence: Callable[[np.ndarray], np.ndarray] | None = None

    @property
    def draw_count(self) -> int:
        return 0 if not self.draw_width else (self.items.shape[1] - self.draw_width) // self.draw_width

    def value(self, rows: np.ndarray | slice = slice(None), draws: np.ndarray | None = None) -> float:
        """The main score on the items ``rows`` and, where the task has draws, the draws ``draws``
        (indices, repeats allowed); all of either by default."""
        items = self.items[rows]
        if draws is not None and self.draw_width:
            width = self.draw_width
            columns = np.concatenate([np.arange(width), *(width * (1 + d) + np.arange(width) for d in draws)])
            items = items[:, columns]
        return self.statistic(items)

    def one_draw(self, draw: int) -> Outcomes:
        """The outcomes of one of a few-shot probe's draws alone."""
        width = self.draw_width
        columns = np.concatenate([np.arange(width), width * (1 + draw) + np.arange(width)])
        draws = self.draws[draw : draw + 1]
        return Outcomes({}, self.items[:, columns], self.statistic, draws, width, self.ids, influence=self.influence)

    def item_standard_error(self, rounds: int = BOOTSTRAP_ROUNDS, seed: int = 0) -> float:
        """The main score's standard error over the items (a bootstrap; draws held fixed)."""
        n = len(self.items)
        if n < 2:
            return float("nan")
        rng = np.random.default_rng(seed)
        values = [self.statistic(self.items[rng.integers(0, n, n)]) for _ in range(rounds)]
        return float(np.std(values, ddof=1))

    def draw_standard_error(self) -> float | None:
        """The main score's standard error over the draws (None for a task without several)."""
        if self.draws is None or len(self.draws) < 2:
            return None
        return float(np.std(self.draws, ddof=1) / np.sqrt(len(self.draws)))

    def standard_errors(self, rounds: int = BOOTSTRAP_ROUNDS, seed: int = 0) -> dict[str, float]:
        """``main_se``, the main score's standard error from both sources of scoring noise taken as
        independent, and its parts: ``main_se_items`` (which items were scored) and, where there
        are several draws, ``main_se_draws`` (which training examples a few-shot probe was fitted on)."""
        items = self.item_standard_error(rounds, seed)
        draws = self.draw_standard_error()
        if draws is None:
            return {"main_se": items, "main_se_items": items}
        return {"main_se": float(np.hypot(items, draws)), "main_se_items": items, "main_se_draws": draws}

    def standard_error(self, rounds: int = BOOTSTRAP_ROUNDS, seed: int = 0) -> float:
        return self.standard_errors(rounds, seed)["main_se"]

    def summary(self) -> dict[str, float]:
        """The scores with their standard errors (``standard_errors``), ``n`` (items scored), where the
        items have ids their ``items_digest`` (two rows with the same digest scored the same items), and
        each stratum's scores (``stratum_scores``)."""
        digest = {"items_digest": items_digest(self.ids)} if self.ids else {}
        return {
            **self.scores,
            **self.standard_errors(),
            "n": float(len(self.items)),
            **digest,
            **self.stratum_scores(),
        }

    def subset(self, rows: np.ndarray) -> Outcomes:
        """The outcomes of ``rows`` alone (a stratum), draws kept."""
        ids = tuple(self.ids[i] for i in rows) if self.ids else ()
        return Outcomes(
            {},
            self.items[rows],
            self.statistic,
            self.draws,
            self.draw_width,
            ids,
            binary=self.binary,
            influence=self.influence,
        )

    def stratum_scores(self) -> dict[str, float]:
        """Per stratum ``label``: the main score on its rows (``label``), its standard error over them
        (``label_se``; draws held fixed), their count (``label_n``) and the mean of each ``per_item``
        metric (``label_<metric>``). A stratum of one item has no interval and is left out."""
        out: dict[str, float] = {}
        for label, rows in self.strata.items():
            if len(rows) < 2:
                continue
            part = self.subset(rows)
            out[label] = part.value()
            out[f"{label}_se"] = part.item_standard_error()
            out[f"{label}_n"] = float(len(rows))
            out |= {f"{label}_{metric}": float(np.mean(values[rows])) for metric, values in self.per_item.items()}
        return out


def items_digest(ids: tuple[str, ...]) -> float:
    """A checksum of the item ids a part scored (CRC-32, as a number so it travels with the scores)."""
    return float(zlib.crc32("\n".join(ids).encode()))


def mean_of_rows(items: np.ndarray) -> float:
    """The statistic of tasks whose main score is a mean over items (nDCG over queries, accuracy)."""
    return float(np.mean(items))
