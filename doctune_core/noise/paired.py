"""A gain between two rows scored on the same items (``paired_gain``), one task's with its strata
(``task_gain``), and what the items did where they leave no width."""

from __future__ import annotations

from dataclasses import astuple, fields

import numpy as np

from doctune_core.noise.gain import Gain, SeedSpread, TaskGain
from doctune_core.noise.rules import (
    DECIDED_WEIGHT,
    LEVEL,
    NO_WIDTH,
    PSEUDO_ITEMS,
    check_paired,
    decided_share,
    too_few_to_decide,
)
from doctune_core.noise.variance import (
    BinaryPart,
    combined_variance,
    draw_variance,
    item_variance,
    score_interval,
    t_interval,
    t_quantile,
)
from doctune_core.outcomes import Outcomes, mean_of_rows


def paired_gain(
    a: dict[str, Outcomes],
    b: dict[str, Outcomes],
    weights: dict[str, float],
    seeds: SeedSpread | None = None,
    level: float = LEVEL,
    seed: int = 0,
    pseudo_items: float | None = None,
    binary_score: bool = True,
) -> Gain:
    """The weighted mean over ``weights``' tasks of main(a) - main(b), and its interval (the
    docstring of ``doctune_core.noise``); ``seeds``: the training seeds' spread of a's score where it
    was measured;
    ``pseudo_items``: a continuous mean's (``item_variance``): by default ``PSEUDO_ITEMS`` for a gain on
    one part, none for a gain over several, whose other parts give it width; ``binary_score``: binary
    parts' variance at each candidate gain (``score_interval``), else at the observed one with
    ``pseudo_items`` as a continuous part's (the calibration compares both). No interval where the
    tasks ``too_few_to_decide`` lets through carry less than ``DECIDED_WEIGHT`` of the weight."""
    for task in weights:
        check_paired(task, a[task], b[task])
        if a[task].draw_count != b[task].draw_count:
            raise ValueError(f"{task}: the two rows were scored on different draws")
    total = sum(weights.values())
    difference = float(sum(w * (a[t].value() - b[t].value()) for t, w in weights.items()) / total)
    rng = np.random.default_rng(seed)
    if pseudo_items is None:
        pseudo_items = PSEUDO_ITEMS if len(weights) == 1 else 0.0
    fixed, binary = [], []
    for task, weight in weights.items():
        share = (weight / total) ** 2
        if binary_score and a[task].binary and a[task].statistic is mean_of_rows:
            differences = np.asarray(a[task].items, float) - np.asarray(b[task].items, float)
            up, down = int(np.sum(differences > 0)), int(np.sum(differences < 0))
            binary.append(BinaryPart(share, up, down, len(differences), float(np.mean(differences))))
            continue
        variance = item_variance(a[task], b[task], rng, pseudo_items=pseudo_items)
        fixed.append((share * variance, max(len(a[task].items) - 1, 1)))
        draws, draws_dof = draw_variance(a[task], b[task], variance)
        fixed.append((share * draws, draws_dof))
    if seeds is not None:
        fixed.append((seeds.sd**2, max(seeds.runs - 1, 1)))

    def components_at(gain: float) -> list[tuple[float, float]]:
        # each binary part's gain moves with the whole one's, by the same amount
        return fixed + [part.component(part.gain + gain - difference) for part in binary]

    se, dof = combined_variance(components_at(difference))
    if binary:
        low, high = score_interval(difference, components_at, level)
    else:
        low, high, se, dof = t_interval(difference, fixed, level)
    if seeds is not None:  # never narrower than the seeds' own t interval (``seed_mean_gain`` says why)
        half = t_quantile(level, max(seeds.runs - 1, 1)) * seeds.sd
        low, high = min(low, difference - half), max(high, difference + half)
    reasons = {task: why for task in weights if (why := too_few_to_decide(a[task]))}
    if decided_share(weights, reasons) < DECIDED_WEIGHT:
        why = "; ".join(f"{t}: {why}" if len(weights) > 1 else why for t, why in reasons.items())
        return Gain(difference, None, None, se, dof, level, seeds is not None, undecided=why)
    pairs = {t: (a[t], b[t]) for t in weights}
    made_of = {"fixed": [list(c) for c in fixed], "binary": [list(astuple(part)) for part in binary]}
    # where the binary parts give the interval its width (their score interval), their items are the ones counted
    counted_pairs = {t: pair for t, pair in pairs.items() if pair[0].binary} or pairs
    counted = {
        "disagreed": sum(disagreeing_items(*p) for p in counted_pairs.values()),
        "items": len_items(counted_pairs),
        "components": made_of,
    }
    if high - low <= NO_WIDTH:  # the items left no noise to measure: say what they did instead
        return Gain(
            difference, None, None, se, dof, level, seeds is not None, agreement=items_agreement(pairs), **counted
        )
    return Gain(difference, low, high, se, dof, level, seed_noise=seeds is not None, **counted)


def len_items(pairs: dict[str, tuple[Outcomes, Outcomes]]) -> int:
    return sum(len(a.items) for a, _ in pairs.values())


def disagreeing_items(a: Outcomes, b: Outcomes) -> int:
    """How many items the two rows scored apart: a mean over items, those whose scores differ; a
    probe (or any score over rows), those whose rows differ in any column (a few-shot draw's prediction)."""
    items_a, items_b = np.asarray(a.items), np.asarray(b.items)
    if a.statistic is mean_of_rows:
        return int(np.sum(np.round(items_a.astype(float) - items_b.astype(float), 9) != 0))
    return int(np.sum(np.any((items_a != items_b).reshape(len(items_a), -1), axis=1)))


def items_agreement(pairs: dict[str, tuple[Outcomes, Outcomes]]) -> str:
    """What the items of a gain whose interval has no width did, in words: "no item of 60 disagreed"
    (no item, nor any few-shot draw, scored apart), else "every item of 60 moved by +0.020" (each a
    mean over items whose differences are all one value), else each task's."""
    moves = {}
    for task, (a, b) in pairs.items():
        if not disagreeing_items(a, b):
            moves[task] = (len(a.items), 0.0)
        elif a.statistic is mean_of_rows:
            differences = np.unique(np.round(np.asarray(a.items, float) - np.asarray(b.items, float), 9))
            moves[task] = (len(a.items), float(differences[0]) if len(differences) == 1 else None)
        else:
            moves[task] = (len(a.items), None)
    n = len_items(pairs)
    shifts = {shift for _, shift in moves.values()}
    if shifts == {0.0}:
        return f"no item of {n} disagreed"
    if len(shifts) == 1 and None not in shifts:
        return f"every item of {n} moved by {shifts.pop():+.3f}"
    return "items all moved alike within each task: " + "; ".join(
        f"{task}: {count} by {shift:+.3f}" if shift is not None else f"{task}: {count}, apart"
        for task, (count, shift) in moves.items()
    )


def task_gain(a: Outcomes, b: Outcomes, task: str, seeds: dict[str, SeedSpread] | None = None) -> TaskGain:
    """Row a's gain over row b on one task's part, paired by item (``paired_gain``), with the same
    gain per stratum of a's (a retrieval task's length buckets, each with its ``n``). ``seeds``: the
    training seeds' spread of a's score (``main``) and of each stratum's (its label), where they were
    measured."""
    seeds = seeds or {}

    def gain_on(a_part: Outcomes, b_part: Outcomes, spread: SeedSpread | None, **extra) -> TaskGain:
        gain = paired_gain({task: a_part}, {task: b_part}, {task: 1.0}, spread)
        return TaskGain(**{f.name: getattr(gain, f.name) for f in fields(Gain)}, **extra)

    strata = {
        label: gain_on(a.subset(rows), b.subset(rows), seeds.get(label), n=len(rows))
        for label, rows in a.strata.items()
        if len(rows) >= 2  # as Outcomes.stratum_scores: one item has no interval at all
    }
    return gain_on(a, b, seeds.get("main"), by_stratum=strata)
