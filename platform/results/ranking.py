"""Whether a search's ranking means something: its scores' noise against its trials' differences.

At the end of a search every scored trial's chosen checkpoint (and each baseline row) is scored
item by item on the validation parts (``evaluators.pool_calls.checkpoint_outcomes``, from the embedding
cache), and ``assess`` measures, where the ranking is made:

- each objective task's standard error at its budget (the items' and, for few-shot probes, the
  draws'), the median over the trials;
- the spread of the trials' validation objectives against the spread scoring noise alone would
  give them (``doctune_core.noise.spread_test``), the noise of a difference between two trials, and
  the training seeds' spread where ``search.confirm_seeds`` measured it;
- the winner against the runner-up and against each baseline row on the same validation items
  (a paired interval, ``doctune_core.noise.paired_gain``; the winner was chosen on these items, so
  its lead is optimistic: the test gains on the leaderboard are the unbiased ones);
- when the trials are within noise, the budget that would tell them apart: a power calculation
  (``doctune_core.noise.items_needed``) from the measured noise and the spread left once noise is
  taken out, in scoring items per task and in trials;
- when the winner's test gains over the baseline rows are all within noise, the test items that
  would tell gains of their size (``doctune_core.noise.items_to_tell``).

The record (``RankingNoise.record``) is kept in ``leaderboard.json`` and shown by the terminal, the
report and the model card as the sentences of ``verdict``.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from doctune_core.noise import (
    POWER,
    Gain,
    SeedSpread,
    Spread,
    items_needed,
    items_to_tell,
    joint_resamples,
    paired_gain,
    spread_test,
)
from evaluators.readings import ReadingCount
from evaluators.scores import part

RANKING_PART = "val"
MAX_TRIALS_CONSIDERED = 1000  # the largest number of trials a budget estimate looks at
MAX_ITEMS_FACTOR = 100  # a test budget beyond this many times today's items is said as "more than" it


@dataclass
class RankingNoise:
    """What ``assess`` measured (see the module docstring); ``None`` where it could not be."""

    tasks: dict[str, dict[str, float]]  # task -> median main_se (and its parts) and items per part
    trials: Spread | None
    runner_up: Gain | None = None  # the winner minus the next trial, on validation
    over_baselines: dict[str, Gain] = field(default_factory=dict)  # the winner minus each baseline, on validation
    items_factor: float | None = None  # scoring items needed to tell the trials apart, as a multiple of today's
    trials_needed: int | None = None  # trials needed at today's items to tell them apart
    note: str | None = None  # why something could not be measured

    def record(self) -> dict:
        return {
            "part": RANKING_PART,
            "tasks": self.tasks,
            "trials": self.trials.record() if self.trials else None,
            "runner_up": self.runner_up.record() if self.runner_up else None,
            "over_baselines": {name: gain.record() for name, gain in self.over_baselines.items()},
            "items_factor": self.items_factor,
            "trials_needed": self.trials_needed,
            "power": POWER,
            "note": self.note,
        }

    @classmethod
    def from_record(cls, record: dict) -> RankingNoise:
        return cls(
            tasks=record["tasks"],
            trials=Spread.from_record(record["trials"]) if record.get("trials") else None,
            runner_up=Gain.from_record(record["runner_up"]) if record.get("runner_up") else None,
            over_baselines={k: Gain.from_record(v) for k, v in record.get("over_baselines", {}).items()},
            items_factor=record.get("items_factor"),
            trials_needed=record.get("trials_needed"),
            note=record.get("note"),
        )


def task_noise(rows, tasks: list[str]) -> dict[str, dict[str, float]]:
    """Each task's validation standard error (and its parts), the median over ``rows``, and its items."""
    noise = {}
    for task in tasks:
        parts = [part(row.scores, task, RANKING_PART) for row in rows]
        parts = [p for p in parts if "main_se" in p]
        if not parts:
            continue
        noise[task] = {
            key: statistics.median(p[key] for p in parts)
            for key in ("main_se", "main_se_items", "main_se_draws", "n")
            if all(key in p for p in parts)
        }
    return noise


def seed_spread(best, weights: dict[str, float], split: str = "test", label: str = "main") -> SeedSpread | None:
    """The training seeds' standard deviation of the weighted mean of ``weights``' tasks' ``label``
    scores (``main``, or a length bucket's) on ``split``, over the extra training seeds of
    ``search.confirm_seeds`` (the winner's own run left out: it was chosen for its score), or None
    with fewer than two runs that scored them all (a report-only task's test part is not scored for
    them)."""
    values = []
    for run in (best.confirmation or {}).get("seeds", {}).values():
        scores = run.get("scores", {})
        if run.get("trial") == best.trial or not all(label in part(scores, t, split) for t in weights):
            continue
        values.append(sum(w * part(scores, t, split)[label] for t, w in weights.items()) / sum(weights.values()))
    return SeedSpread(statistics.stdev(values), len(values)) if len(values) >= 2 else None


def trials_needed_for(spread: Spread) -> int | None:
    """The fewest trials that, at today's noise and the measured true spread, call the spread
    beyond noise with probability ``POWER`` (the chi-square view of ``items_needed``)."""
    from scipy import stats

    if spread.true_spread <= 0 or spread.noise_spread <= 0:
        return None
    for n in range(2, MAX_TRIALS_CONSIDERED + 1):
        dof = n - 1
        critical = stats.chi2.ppf(spread.level, dof)
        if stats.ncx2.sf(critical, dof, dof * spread.true_spread**2 / spread.noise_spread**2) >= POWER:
            return n
    return None


def assess(
    trials: list, baselines: list, outcomes, weights: dict[str, float], seeds: SeedSpread | None
) -> RankingNoise:
    """The ranking's noise for ``trials`` (scored leaderboard rows, ranked best first) and
    ``baselines``; ``outcomes(row)`` gives a row's item-level validation outcomes per task; ``seeds``:
    the training seeds' spread of the validation objective, where measured."""
    tasks = task_noise(trials or baselines, list(weights))
    if len(trials) < 2:
        note = "one scored trial: nothing to rank" if trials else "no scored trial"
        return RankingNoise(tasks, None, note=note)
    per_trial = [outcomes(row) for row in trials]
    observed, resampled = joint_resamples(per_trial, weights)
    spread = spread_test(observed, resampled, seeds.sd if seeds else None)
    best = per_trial[0]
    # two trained rows each carry one training run's noise; an untrained baseline none
    between_trials = SeedSpread(seeds.sd * math.sqrt(2), seeds.runs) if seeds else None
    noise = RankingNoise(tasks, spread, runner_up=paired_gain(best, per_trial[1], weights, between_trials))
    for baseline in baselines:
        noise.over_baselines[baseline.trial] = paired_gain(best, outcomes(baseline), weights, seeds)
    if not spread.beyond_noise:
        noise.items_factor = items_needed(spread, 1)
        noise.trials_needed = trials_needed_for(spread)
    return noise


def verdict(
    noise: RankingNoise, gains: dict[str, Gain] | None = None, reading: ReadingCount | None = None
) -> list[str]:
    """The assessment in sentences, for the terminal, the report and the model card; ``gains``: the
    winner's test gains over the baseline rows (``LeaderboardRow.gains``), each saying how often its
    locked part was read before (``reading``, the winner's ``LeaderboardRow.locked_reading``)."""
    lines = []
    if noise.tasks:
        lines.append(
            "Scoring noise on the validation parts (standard error of each task's main score): "
            + "; ".join(_task_noise(task, values) for task, values in noise.tasks.items())
            + "."
        )
    spread = noise.trials
    if spread is None:
        return [*lines, f"Ranking: {noise.note}.", *_test_gains(gains, reading)]
    seeds = (
        f", training seeds ({spread.seed_sd:.4f}) included"
        if spread.seed_sd
        else "; training-seed noise not measured (search.confirm_seeds measures it)"
    )
    lines.append(
        f"The {spread.encoders} trials' validation objectives spread {spread.spread:.4f} (standard deviation); "
        f"scoring noise alone would spread them {spread.noise_spread:.4f}{seeds}: ratio {spread.ratio:.2f}, "
        f"p = {spread.p_value:.3f}. A difference between two trials has a standard error of {spread.difference_se:.4f}."
    )
    if spread.beyond_noise:
        lines.append("The trials differ beyond noise: the ranking means something at this budget.")
    else:
        lines.append(
            "The trials are within noise of each other: at this budget the ranking cannot tell them apart, "
            "and the winner is one of several equally good (or equally bad) configurations."
        )
    if noise.runner_up is not None:
        lines.append(f"The winner ahead of the next trial on validation: {noise.runner_up.describe()}.")
    for name, gain in noise.over_baselines.items():
        lines.append(f"The winner over {name} on validation (optimistic: chosen on these items): {gain.describe()}.")
    lines += _test_gains(gains, reading)
    if not spread.beyond_noise:
        lines.append(_budget(noise))
    return lines


def _test_gains(gains: dict[str, Gain] | None, reading: ReadingCount | None) -> list[str]:
    lines = [f"The winner over {name} on test (unbiased): {gain.describe()}." for name, gain in (gains or {}).items()]
    if gains and not any(g.difference > 0 and g.beyond_noise for g in gains.values()):
        lines.append("Nothing this search tried beat the base beyond noise on test at this budget.")
        lines += _test_budget(gains)
    # each test verdict says how often its locked part was read before (a list's items, by its title)
    if reading is None:
        return lines
    return [line if line.startswith("  ") else f"{line} [{reading.describe()}]" for line in lines]


def _test_budget(gains: dict[str, Gain]) -> list[str]:
    """The test items that would tell gains as large as the winner's beyond noise (a power
    calculation from each gain's own interval, ``doctune_core.noise.items_to_tell``): a title, then
    a line for each row compared."""
    told = []
    for name, gain in gains.items():
        factor = items_to_tell(gain)
        if factor is None:
            told.append(f"  over {name}: none, it scored as high or higher")
        elif factor > MAX_ITEMS_FACTOR:
            told.append(f"  over {name}: more than {MAX_ITEMS_FACTOR}×")
        else:
            told.append(f"  over {name}: about {factor:.1f}×")
    return [
        f"Budget to tell test gains this large beyond noise ({POWER:.0%} power), in test items, every objective "
        "task's part scaled alike:",
        *told,
        "  (gains this small may not be worth that: training longer or searching wider may find larger ones)",
    ]


def _task_noise(task: str, values: dict[str, float]) -> str:
    parts = f"items {values['main_se_items']:.4f}" if "main_se_items" in values else ""
    if "main_se_draws" in values:
        parts += f", few-shot draws {values['main_se_draws']:.4f}"
    items = f" over {values['n']:.0f} items" if "n" in values else ""
    return f"{task} {values['main_se']:.4f}{items}" + (f" ({parts})" if parts else "")


def _budget(noise: RankingNoise) -> str:
    spread = noise.trials
    if noise.items_factor is None:
        return (
            "Budget to tell them apart: none can be estimated, since the spread left once noise is taken out is "
            f"{spread.true_spread:.4f}: these configurations may not differ at all at these training steps. Train "
            "longer, or search a wider space, before scoring more items."
        )
    counts = ", ".join(
        f"{task} {values['n']:.0f} → {math.ceil(values['n'] * noise.items_factor)}"
        for task, values in noise.tasks.items()
        if "n" in values
    )
    trials = (
        f"; or, at today's items, about {noise.trials_needed} trials"
        if noise.trials_needed
        else "; more trials alone would not reach it"
    )
    return (
        f"Budget to tell trials that differ as much as these apart ({spread.true_spread:.4f} once noise is taken "
        f"out) with {POWER:.0%} power: about {noise.items_factor:.1f}× the validation items ({counts}){trials}."
    )
