"""How often a gain's 95% interval covers the true gain, at the sizes the profiles ship.

    .venv/bin/python bench/gain_calibration.py [--comparisons 2000] [--rounds 400] [--only PART ...]
        [--profiles local full] [--recorded FILE] [--out FILE] [--paired-only]

**Populations, from recorded runs.** ``--recorded`` (bench/results/recorded_outcomes.json, written by
bench/recorded_outcomes.py) holds, item by item on the validation parts, a trained checkpoint of the
default search and its two bases (the converted one and the one as given): the two comparisons a
search prints (``pair``). Each task's recorded pairs of outcomes are its population: binary acc@1
per question for needle and passkey (the longest haystacks a round scores: 2,048 tokens at the
local profile's sizes, 4,096 at the full one's; "a length" pools the grid's lengths), nDCG@10 per
query for the title and passage tasks, R8's documents with their labels and the predictions of ten
few-shot draws for the probe (macro-F1 over the draws).

**A known gain.** Each population is moved to a true gain of 0, 0.02, 0.05 or 0.10 keeping its
pairing: a continuous task (nDCG@10, in [0, 1]) moves each of the trained row's scores the same
share of the way to 1 (or to 0), so the queries it ranks perfectly stay as they are; a binary task
(copied 20 times over, for a fine enough step) turns the trained row's misses into hits (those the
base missed too first), or its hits into misses (those the base missed first); the probe turns a
share of the trained row's errors right (or its hits wrong) in every draw, the share found by
bisection. The
true gain is the population's own, computed after the move: a task near its ceiling (the news titles:
nDCG@10 0.95) cannot gain 0.10, and its row says the gain it reached.

**A comparison.** Each task's items are drawn from its population with replacement at the
profile's size (``SIZES``: the local profile's 60 queries, 200 documents over 3 draws, 30
questions; the full profile's whole validation parts, 5 draws, 50 questions), the probe's draws
without replacement from the ten. Seeds: the trained row's score on each task is off by a normal
deviation of that task's seed spread (``seed_sd``: its median over the shipped recipe's recorded
rows of the standard deviation over their 3 seeds), and the spread is estimated from ``seeds`` more runs (2 or 3), as
``search.confirm_seeds`` measures it; "none": no seed noise and none measured (the interval is then
this run's gain's).

**Methods.** ``paired t`` is the interval adopted (``doctune_core.noise.paired_gain``: Satterthwaite's
degrees of freedom; a binary part's variance at each candidate gain, Tango's, the interval inverted
from it; pseudo-items on a gain on one continuous part; the seeds' variance with k - 1 degrees of
freedom; "too few items to decide" by the rule fixed before this calibration), beside the one
adopted before it (a binary part's variance at the observed gain, with Bonett-Price's pseudo-items
on a gain on one part), that one with pseudo-items on every part and with none. On the same
comparisons: ``percentile`` (the interval before them: items and draws resampled with
replacement, widened by sqrt(m / (m - 1)), a normal seed term of the estimated spread), ``BCa``
(Efron 1987: the same resamples, bias-corrected and accelerated from the rows' influence values),
``Bayesian`` (Rubin 1981: Dirichlet weights on items and draws, the same seed term) and, on a
single binary task, ``McNemar`` (the exact conditional interval: Clopper-Pearson on the discordant
pairs' split, scaled by their share; it has no seed term).

Prints two Markdown tables (``method_table``: each method's rows; ``coverage_table``: every row, the
adopted interval's coverage with Wilson's 95% interval, "too few items to decide" where the rule
prints none) and writes every row to ``--out`` as it finishes; a run started again goes on where it
stopped. ``--paired-only`` computes the paired t intervals alone (seconds a row, where the resampling
methods take minutes). The current figures: the full profile's rows on the 64-step population
(``--profiles full --recorded bench/results/recorded_outcomes_64_steps.json --out
bench/results/gain_calibration_full.json``), the local profile's on the population recorded at its own
sizes (``--profiles local --recorded bench/results/recorded_outcomes_local.json --out
bench/results/gain_calibration_local.json``).
"""

from __future__ import annotations

import argparse
import fcntl
import json
import math
import os
import sys
import time
from functools import cache, partial
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))

from bench.markdown import table  # noqa: E402
from doctune_core.noise import FEW_DISAGREED  # noqa: E402

TITLE, PROBE, PASSAGE, NEEDLE, PASSKEY = (
    "news-title-retrieval",
    "r8-fewshot",
    "news-passage-retrieval",
    "needle-retrieval",
    "passkey-retrieval",
)
LENGTH = "a needle length"  # one length of the needle grid (the per-length rows a search prints)
OBJECTIVE = {TITLE: 1.0, PROBE: 1.0, NEEDLE: 0.5, PASSKEY: 0.5, PASSAGE: 1.0}  # search_spaces/docsplit_long.yaml
LONG_TASKS = {NEEDLE: 0.5, PASSKEY: 0.5, PASSAGE: 1.0}
PARTS = {
    "objective": OBJECTIVE,
    "long tasks pooled": LONG_TASKS,
    TITLE: {TITLE: 1.0},
    PASSAGE: {PASSAGE: 1.0},
    PROBE: {PROBE: 1.0},
    NEEDLE: {NEEDLE: 1.0},
    LENGTH: {LENGTH: 1.0},
}
# items per task (None: the whole recorded validation part) and few-shot draws, per profile: the
# local profile's limits in search_spaces/docsplit_long.yaml, the full profile's EvalBudget defaults
SIZES = {
    "local": ({TITLE: 60, PROBE: 200, PASSAGE: 60, NEEDLE: 30, PASSKEY: 30, LENGTH: 30}, 3),
    "full": ({TITLE: None, PROBE: None, PASSAGE: None, NEEDLE: 50, PASSKEY: 50, LENGTH: 50}, 5),
}
# the recorded studies of the shipped recipe (the training frontier's rows at each round, DocSplit's split
# among them; the dropout-temperature and weight-merge batches) whose seeds give the seeds' spreads
STUDIES = ("training_frontier", "dropout_temperature", "weight_merge")


def recorded_seed_spreads(parts: dict[str, dict[str, float]], studies: tuple[str, ...] = STUDIES) -> dict:
    """Each part's seed spread in every recorded row: part -> row -> the sample standard deviation
    over the row's seeds of the part's validation score (``parts``: name -> task weights; each study's
    record, bench/study/<study>/runs/<row>/seed<k>/result.json; a row with scoring rounds once a round)."""
    spreads: dict[str, dict[str, float]] = {part: {} for part in parts}
    for study in studies:
        for row in sorted((ROOT / "bench" / "study" / study / "runs").iterdir()):
            seeds = [json.loads(p.read_text()) for p in sorted(row.glob("seed*/result.json"))]
            for step in seeds[0].get("rounds") or {"": None}:
                scores = [s["rounds"][step] if step else s["scores"] for s in seeds]
                name = f"{study}: {row.name}" + (f" at {step} steps" if step else "")
                for part, weights in parts.items():
                    total = sum(weights.values())
                    values = [sum(w * s[t]["val"]["main"] for t, w in weights.items()) / total for s in scores]
                    spreads[part][name] = float(np.std(values, ddof=1))
    return spreads


@cache
def seed_sd() -> dict[str, float]:
    """One training run's standard deviation of each task's validation score: its median over the
    recorded rows (``recorded_seed_spreads``); a needle length's, the needle task's."""
    tasks = (TITLE, PROBE, PASSAGE, NEEDLE, PASSKEY)
    spreads = recorded_seed_spreads({task: {task: 1.0} for task in tasks})
    medians = {task: float(np.median(list(spreads[task].values()))) for task in tasks}
    return medians | {LENGTH: medians[NEEDLE]}


GAINS = (0.0, 0.02, 0.05, 0.10)
# the needle and passkey haystacks a round scores (haystacks: longest): 2,048 tokens locally, 4,096 in full
LONGEST = {"local": "len_1025to2048", "full": "len_2049to4096"}
# the paired t interval as adopted (doctune_core.noise.paired_gain: binary parts' variance at each candidate
# gain, Tango's; a continuous mean's pseudo-items, 1 on each side, on a gain on one part), and the one
# adopted before it (binary parts' variance at the observed gain, with the same pseudo-items as a
# continuous part's) with pseudo-items on every part and with none (Wald)
PAIRED_T = {
    "paired t": {},
    "paired t, binary at the observed gain": {"binary_score": False},
    "paired t, binary at the observed gain, pseudo-items on every part": {"binary_score": False, "pseudo_items": 1.0},
    "paired t, binary at the observed gain, none": {"binary_score": False, "pseudo_items": 0.0},
}
METHODS = (*PAIRED_T, "percentile", "BCa", "Bayesian", "McNemar")
COPIES = 20  # a binary population copied over so that a flip moves its gain by a fine step


class Population:
    """One task's recorded pairs of outcomes (trained ``a``, base ``b``), moved to a true gain.
    ``kind``: mean (continuous), binary, or probe (rows: the truth, then one column per draw)."""

    def __init__(self, kind: str, a: np.ndarray, b: np.ndarray) -> None:
        self.kind, self.a, self.b = kind, a, b

    @property
    def size(self) -> int:
        return len(self.a)

    def gain(self) -> float:
        if self.kind == "probe":
            return float(np.mean(probe_draw_values(self.a) - probe_draw_values(self.b)))
        return float(np.mean(self.a - self.b))

    def moved_to(self, target: float, rng: np.random.Generator) -> Population:
        """The population at true gain ``target``, pairing kept (the module's docstring); a gain
        past what the scores' bounds allow stops there (the row says the gain reached)."""
        if self.kind == "mean":
            a = self.a.astype(float).copy()
            missing = target - self.gain()
            room = np.clip(1.0 - a, 0, None) if missing > 0 else np.clip(a, 0, None)  # nDCG lies in [0, 1]
            share = min(abs(missing) * len(a) / room.sum(), 1.0) if room.sum() > 0 else 0.0
            a += np.sign(missing) * share * room
            return Population("mean", a, self.b)
        if self.kind == "binary":
            a, b = np.tile(self.a, COPIES).astype(float), np.tile(self.b, COPIES).astype(float)
            flips = round((target - float(np.mean(a - b))) * len(a))
            # more gain: misses the base also missed first, then the base's hits; less: the reverse
            if flips > 0:
                order = [np.flatnonzero((a == 0) & (b == 0)), np.flatnonzero((a == 0) & (b == 1))]
            else:
                order = [np.flatnonzero((a == 1) & (b == 0)), np.flatnonzero((a == 1) & (b == 1))]
            candidates = np.concatenate([rng.permutation(c) for c in order])[: abs(flips)]
            a[candidates] = 1.0 - a[candidates]
            return Population("binary", a, b)
        return self._probe_moved_to(target, rng)

    def _probe_moved_to(self, target: float, rng: np.random.Generator) -> Population:
        truth = self.a[:, :1]
        wrong = self.a[:, 1:] != truth
        order = rng.permutation(wrong.size).reshape(wrong.shape)  # which cells move first

        def moved(share: float) -> np.ndarray:
            a = self.a.copy()
            up = share >= 0
            cells = (wrong if up else ~wrong) & (order < abs(share) * wrong.size)
            if up:
                a[:, 1:] = np.where(cells, truth, a[:, 1:])
            else:  # a hit turned into the base's prediction where that is wrong, else the next class
                other = np.where(self.b[:, 1:] != truth, self.b[:, 1:], (truth + 1) % (int(self.a.max()) + 1))
                a[:, 1:] = np.where(cells, other, a[:, 1:])
            return a

        low, high = -1.0, 1.0
        for _ in range(40):  # bisection on the share of cells moved
            middle = (low + high) / 2
            if Population("probe", moved(middle), self.b).gain() < target:
                low = middle
            else:
                high = middle
        return Population("probe", moved((low + high) / 2), self.b)


def probe_draw_values(items: np.ndarray) -> np.ndarray:
    from evaluators.tasks.probe_metrics import draw_values, macro_f1

    return draw_values(items, 1, macro_f1)


def population(recorded: dict, pair: str, task: str, profile: str) -> Population:
    """``task``'s population for ``pair`` (trained over ``converted`` or over ``base``): as recorded at
    a profile's own sizes (``bench/recorded_outcomes.py --profile local``: the needle and passkey parts
    a round scores), or at the full sizes (their grids: the stratum of ``profile``'s longest haystacks)."""
    a_parts, b_parts = recorded["rows"]["trained"]["parts"], recorded["rows"][pair]["parts"]
    if task in (TITLE, PASSAGE):
        return Population("mean", np.array(a_parts[task]["items"], float), np.array(b_parts[task]["items"], float))
    if task == PROBE:
        return Population("probe", np.array(a_parts[task]["items"]), np.array(b_parts[task]["items"]))
    if task in a_parts or (task == LENGTH and NEEDLE in a_parts):  # recorded at a profile's own sizes
        name = NEEDLE if task == LENGTH else task  # the round's haystacks: one length of the grid
        return Population("binary", np.array(a_parts[name]["items"], float), np.array(b_parts[name]["items"], float))
    grid = f"{NEEDLE if task == LENGTH else task}@grid"
    a, b = np.array(a_parts[grid]["items"]), np.array(b_parts[grid]["items"])
    rows = np.arange(len(a)) if task == LENGTH else np.array(a_parts[grid]["strata"][LONGEST[profile]])
    return Population("binary", a[rows], b[rows])


def outcomes_of(kind: str, items: np.ndarray):
    """``Outcomes`` as the task builds them (a retrieval task's, a pairs task's, a probe's)."""
    from doctune_core.outcomes import Outcomes, mean_of_rows
    from evaluators.tasks.probe_metrics import macro_f1, macro_f1_influence, mean_over_draws, mean_over_draws_influence

    if kind != "probe":
        return Outcomes({}, items, mean_of_rows, binary=kind == "binary")
    return Outcomes(
        {},
        items,
        partial(mean_over_draws, width=1, measure=macro_f1),
        probe_draw_values(items),
        draw_width=1,
        influence=partial(mean_over_draws_influence, measure=macro_f1_influence),
    )


def class_counts(items: np.ndarray, classes: int) -> np.ndarray:
    """A probe's rows as count columns, ``(n, draws * 2 * classes)``: for each draw, each class's
    hit (the row's truth is the class and the draw predicted it), then its presence in the truth
    plus in the draw's prediction; a weighted sum over rows gives every macro-F1 count at once."""
    truth = np.eye(classes)[items[:, 0]]
    columns = []
    for d in range(1, items.shape[1]):
        predicted = np.eye(classes)[items[:, d]]
        columns += [truth * (items[:, :1] == items[:, d : d + 1]), truth + predicted]
    return np.hstack(columns)


def macro_f1_rounds(weighted_counts: np.ndarray, classes: int) -> np.ndarray:
    """Each round's macro-F1 per draw, ``(rounds, draws)``, from ``weights @ class_counts(...)``; a
    round's classes are those with weight in its truth or predictions."""
    blocks = weighted_counts.reshape(len(weighted_counts), -1, 2, classes)
    hits, counts = blocks[:, :, 0], blocks[:, :, 1]
    present = counts > 1e-12
    f1 = np.divide(2 * hits, counts, out=np.zeros_like(hits), where=present)
    return f1.sum(axis=2) / present.sum(axis=2)


class Sample:
    """One task's drawn part for both rows: ``a`` and ``b`` items, the kind, and the observed gain."""

    def __init__(self, kind: str, a: np.ndarray, b: np.ndarray) -> None:
        self.kind, self.a, self.b = kind, a, b
        self.n = len(a)
        self.draws = a.shape[1] - 1 if kind == "probe" else 0

    def gain(self) -> float:
        if self.kind == "probe":
            return float(np.mean(probe_draw_values(self.a) - probe_draw_values(self.b)))
        return float(np.mean(self.a - self.b))

    def item_resamples(self, weights: np.ndarray) -> np.ndarray:
        """The gain under each round's item weights ``(rounds, n)`` (counts or Dirichlet), all draws kept."""
        if self.kind != "probe":
            return weights @ (self.a - self.b) / weights.sum(axis=1)
        classes = int(max(self.a.max(), self.b.max())) + 1
        if not hasattr(self, "_counts"):  # both rows' count columns, side by side, made once
            self._counts = np.hstack([class_counts(self.a, classes), class_counts(self.b, classes)])
        per_draw = macro_f1_rounds(weights @ self._counts, classes)
        return per_draw[:, : self.draws].mean(axis=1) - per_draw[:, self.draws :].mean(axis=1)

    def draw_resamples(self, weights: np.ndarray) -> np.ndarray:
        """The gain under each round's draw weights ``(rounds, draws)``, all items kept."""
        per_draw = probe_draw_values(self.a) - probe_draw_values(self.b)
        return (weights * per_draw).sum(axis=1) / weights.sum(axis=1)

    def influence(self) -> np.ndarray:
        """Each item's paired influence on the gain (for BCa's acceleration)."""
        if self.kind != "probe":
            d = self.a - self.b
            return d - d.mean()
        a, b = outcomes_of("probe", self.a), outcomes_of("probe", self.b)
        return a.influence(a.items) - b.influence(b.items)


def counts_of(rng: np.random.Generator, rounds: int, n: int) -> np.ndarray:
    """Resampling with replacement as counts per item, ``(rounds, n)``."""
    picks = rng.integers(0, n, (rounds, n)) + n * np.arange(rounds)[:, None]
    return np.bincount(picks.ravel(), minlength=rounds * n).reshape(rounds, n).astype(float)


def resampled_gains(samples, weights, rng, rounds: int, bayesian: bool) -> np.ndarray:
    """The weighted gain's deviations from the observed one under ``rounds`` resamples of every
    task's items and draws: with replacement (widened by sqrt(m / (m - 1)), the percentile bootstrap
    before this calibration) or with Dirichlet weights (the Bayesian bootstrap)."""
    total = sum(weights.values())
    deviation = np.zeros(rounds)
    for task, weight in weights.items():
        sample = samples[task]
        observed = sample.gain()
        for size, resample in ((sample.n, sample.item_resamples), (sample.draws, sample.draw_resamples)):
            if size < 2:
                continue
            if bayesian:
                shift = resample(rng.dirichlet(np.ones(size), size=rounds)) - observed
            else:
                shift = (resample(counts_of(rng, rounds, size)) - observed) * math.sqrt(size / (size - 1))
            deviation += weight * shift / total
    return deviation


def bca(observed: float, resampled: np.ndarray, samples, weights, level: float = 0.95) -> tuple[float, float]:
    """Efron's BCa interval from bootstrap values ``resampled`` around ``observed``: z0 from their
    share below it, the acceleration from the items' influence values (each task's weighted)."""
    from scipy import stats

    if np.ptp(resampled) == 0:
        return observed, observed
    below = np.mean(resampled < observed) + 0.5 * np.mean(resampled == observed)
    z0 = stats.norm.ppf(np.clip(below, 1e-6, 1 - 1e-6))
    total = sum(weights.values())
    influence = np.concatenate([w / total * samples[t].influence() / samples[t].n for t, w in weights.items()])
    squares = np.sum(influence**2)
    acceleration = np.sum(influence**3) / (6 * squares**1.5) if squares > 0 else 0.0
    ends = []
    for z in stats.norm.ppf([(1 - level) / 2, (1 + level) / 2]):
        ends.append(stats.norm.cdf(z0 + (z0 + z) / (1 - acceleration * (z0 + z))))
    low, high = np.quantile(resampled, ends)
    return float(low), float(high)


def mcnemar(sample: Sample, level: float = 0.95) -> tuple[float, float]:
    """The exact conditional interval of a paired difference of proportions: Clopper-Pearson on the
    share of discordant pairs the trained row won, scaled by the discordant pairs' share."""
    from scipy import stats

    won = int(np.sum((sample.a == 1) & (sample.b == 0)))
    discordant = won + int(np.sum((sample.a == 0) & (sample.b == 1)))
    if discordant == 0:
        return 0.0, 0.0
    tail = (1 - level) / 2
    low = stats.beta.ppf(tail, won, discordant - won + 1) if won > 0 else 0.0
    high = stats.beta.ppf(1 - tail, won + 1, discordant - won) if won < discordant else 1.0
    scale = discordant / sample.n
    return (2 * low - 1) * scale, (2 * high - 1) * scale


def comparison(
    pops: dict[str, Population], weights, sizes, draws, seeds: int, rng, rounds: int, paired_only: bool = False
) -> dict:
    """One simulated comparison: each method's interval (None: none printed), shifted by this
    run's seed deviation (the paired t intervals alone with ``paired_only``), and the items the rows
    scored apart (``Gain.disagreed``: the binary parts' where the part has some)."""
    from doctune_core.noise import SeedSpread, paired_gain

    samples = {}
    for task in weights:
        pop = pops[task]
        rows = rng.integers(0, pop.size, sizes[task] or pop.size)
        if pop.kind == "probe":
            columns = np.concatenate([[0], 1 + rng.choice(pop.a.shape[1] - 1, draws, replace=False)])
            samples[task] = Sample("probe", pop.a[rows][:, columns], pop.b[rows][:, columns])
        else:
            samples[task] = Sample(pop.kind, pop.a[rows], pop.b[rows])
    total = sum(weights.values())
    spread = None
    shift = 0.0
    if seeds:
        # this run's deviation, and the spread of `seeds` more runs, each task's deviation its own
        runs = np.array([[rng.normal(0.0, seed_sd()[t]) for t in weights] for _ in range(seeds + 1)])
        combined = runs @ np.array(list(weights.values())) / total
        shift, spread = combined[0], SeedSpread(float(np.std(combined[1:], ddof=1)), seeds)
    observed = sum(w * samples[t].gain() for t, w in weights.items()) / total + shift
    mine = {t: outcomes_of(s.kind, s.a) for t, s in samples.items()}
    theirs = {t: outcomes_of(s.kind, s.b) for t, s in samples.items()}
    intervals, disagreed = {}, None
    for method, options in PAIRED_T.items():
        gain = paired_gain(mine, theirs, weights, spread, **options)
        intervals[method] = None if gain.low is None else (gain.low + shift, gain.high + shift)
        disagreed = gain.disagreed if method == "paired t" else disagreed
    if paired_only:
        return intervals, disagreed
    seed_term = rng.normal(0.0, spread.sd, rounds) if spread else 0.0
    plain = observed + resampled_gains(samples, weights, rng, rounds, bayesian=False) + seed_term
    intervals["percentile"] = tuple(np.percentile(plain, [2.5, 97.5]))
    intervals["BCa"] = bca(observed, plain, samples, weights)
    bayes = observed + resampled_gains(samples, weights, rng, rounds, bayesian=True) + seed_term
    intervals["Bayesian"] = tuple(np.percentile(bayes, [2.5, 97.5]))
    if len(weights) == 1 and samples[next(iter(weights))].kind == "binary":
        low, high = mcnemar(samples[next(iter(weights))])
        intervals["McNemar"] = (low + shift, high + shift)
    return intervals, disagreed


def calibrate(recorded: dict, part: str, profile: str, pair: str, seeds: int, target: float, args, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    weights = PARTS[part]
    sizes, draws = SIZES[profile]
    pops = {task: population(recorded, pair, task, profile).moved_to(target, rng) for task in weights}
    total = sum(weights.values())
    truth = sum(w * pops[t].gain() for t, w in weights.items()) / total
    covered: dict[str, list[bool]] = {}
    widths: dict[str, list[float]] = {}
    printed, disagreements = 0, []
    for _ in range(args.comparisons):
        intervals, disagreed = comparison(pops, weights, sizes, draws, seeds, rng, args.rounds, args.paired_only)
        printed += intervals["paired t"] is not None
        disagreements.append(disagreed if disagreed is not None else -1)
        for method, interval in intervals.items():
            if interval is None:
                continue
            covered.setdefault(method, []).append(interval[0] <= truth <= interval[1])
            widths.setdefault(method, []).append(interval[1] - interval[0])
    row = {
        "part": part,
        "profile": profile,
        "pair": pair,
        "seeds": seeds,
        "target": target,
        "true_gain": truth,
        "comparisons": args.comparisons,
        "rounds": args.rounds,
        "items": {t: sizes[t] or pops[t].size for t in weights},
        "draws": draws if PROBE in weights else 0,
        "interval_printed": printed / args.comparisons,
        # the items the rows scored apart (the binary parts' where the part has some; -1: not counted, the
        # part too small to decide): the median over comparisons, the share with at most FEW_DISAGREED
        "median_disagreed": float(np.median(disagreements)),
        "few_disagreed": float(np.mean(np.asarray(disagreements) <= FEW_DISAGREED)),
        "methods": {},
    }
    for method, hits in covered.items():
        share = float(np.mean(hits))
        low, high = wilson(share, len(hits))
        zero = float(np.mean(np.asarray(widths[method]) == 0))
        row["methods"][method] = {
            "coverage": share,
            "low": low,
            "high": high,
            "median_width": float(np.median(widths[method])),
            "zero_width": zero,
        }
    return row


def wilson(share: float, n: int) -> tuple[float, float]:
    """Wilson's 95% interval of a binomial share."""
    z = 1.959964
    centre = (share + z**2 / (2 * n)) / (1 + z**2 / n)
    half = z * math.sqrt(share * (1 - share) / n + z**2 / (4 * n**2)) / (1 + z**2 / n)
    return centre - half, centre + half


def settings() -> list[tuple[str, str, str, int]]:
    """(part, profile, pair, seeds) of each row; every row is run at each true gain."""
    rows = []
    for profile in SIZES:
        for seeds in (0, 2, 3):  # the objective over the base as given too, at the local profile's sizes
            pairs = ("converted", "base") if profile == "local" and seeds != 2 else ("converted",)
            rows += [("objective", profile, pair, seeds) for pair in pairs]
            rows.append(("long tasks pooled", profile, "converted", seeds))
        rows += [(part, profile, "converted", 3) for part in (TITLE, PASSAGE, PROBE, NEEDLE, LENGTH)]
    return rows


BAR = (0.93, 0.97)  # the coverage a 95% interval must reach (point estimate)


PREVIOUS = "paired t, binary at the observed gain"  # the interval adopted before "paired t"


def method_table(record: dict) -> list[str]:
    """Each method's rows with an interval: how many, how many within 93-97%, the lowest and the
    highest coverage."""
    rows = []
    for method in METHODS:
        shares = [r["methods"][method]["coverage"] for r in record["rows"] if method in r["methods"]]
        if shares:
            within = sum(BAR[0] <= c <= BAR[1] for c in shares)
            rows.append([method, str(len(shares)), str(within), f"{min(shares):.1%}", f"{max(shares):.1%}"])
    return table(["method", "rows with an interval", "within 93-97%", "lowest", "highest"], rows, numeric=range(1, 5))


def coverage_table(record: dict, adopted: str = "paired t") -> list[str]:
    """Every row at every true gain: the adopted interval's coverage with its Wilson interval (†:
    outside 93-97%; "too few items to decide" where the rule prints none), the interval adopted
    before it on the same comparisons, and the items the rows scored apart: the median over
    comparisons, and the share of comparisons with at most ``FEW_DISAGREED``."""
    rows = []
    for row in record["rows"]:
        items = ", ".join(str(n) for n in row["items"].values()) + (f" ({row['draws']})" if row["draws"] else "")
        reached = abs(row["true_gain"] - row["target"]) > 0.002
        gain = f"{row['target']:g}" + (f" ({row['true_gain']:.3f})" if reached else "")
        seeds = f"{row['seeds']} runs" if row["seeds"] else "none"
        if row["interval_printed"]:
            mine = row["methods"][adopted]
            mark = "" if BAR[0] <= mine["coverage"] <= BAR[1] else " †"
            shown = f"{mine['coverage']:.1%}{mark} ({mine['low']:.1%}–{mine['high']:.1%})"
            before = f"{row['methods'][PREVIOUS]['coverage']:.1%}"
        else:
            shown, before = "too few items to decide", "–"
        disagreed = f"{row['median_disagreed']:g} ({row['few_disagreed']:.0%})"
        rows.append([row["part"], row["profile"], items, row["pair"], seeds, gain, shown, before, disagreed])
    header = ["part", "profile", "items (draws)", "over", "seeds", "gain", "paired t", "before", "disagreed"]
    return table(header, rows, numeric=(5, 7, 8))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--comparisons", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=400)
    parser.add_argument("--only", nargs="+", help="rows of these parts alone (names in PARTS); others may run beside")
    parser.add_argument("--profiles", nargs="+", choices=tuple(SIZES), help="rows at these profiles' sizes alone")
    parser.add_argument("--recorded", type=Path, default=ROOT / "bench" / "results" / "recorded_outcomes_64_steps.json")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "gain_calibration_full.json")
    parser.add_argument(
        "--paired-only", action="store_true", help="the paired t intervals alone (no resampling: seconds a row)"
    )
    args = parser.parse_args(argv)
    recorded = json.loads(args.recorded.read_text())
    record = json.loads(args.out.read_text()) if args.out.exists() else {"rows": []}
    record.setdefault("machine", f"{os.cpu_count()} CPUs, numpy {np.__version__}, {time.strftime('%Y-%m-%d')}")
    key = lambda r: (r["part"], r["profile"], r["pair"], r["seeds"], r["target"], r["comparisons"])  # noqa: E731
    done = {key(r) for r in record["rows"]}
    for index, (part, profile, pair, seeds) in enumerate(settings()):
        if (args.only and part not in args.only) or (args.profiles and profile not in args.profiles):
            continue
        for target in GAINS:
            if (part, profile, pair, seeds, target, args.comparisons) in done:
                continue  # a run started again goes on where it stopped
            began = time.perf_counter()
            row = calibrate(recorded, part, profile, pair, seeds, target, args, seed=1000 * index + int(100 * target))
            with open(args.out.with_suffix(".lock"), "w") as lock:  # runs for other parts may share the file
                fcntl.flock(lock, fcntl.LOCK_EX)
                record = json.loads(args.out.read_text()) if args.out.exists() else record
                record["rows"].append(row)
                args.out.write_text(json.dumps(record, indent=1))
            adopted = row["methods"].get("paired t", {}).get("coverage")
            print(
                f"{part}, {profile}, over {pair}, seeds {seeds}, gain {target}: paired t "
                f"{'no interval' if adopted is None else f'{adopted:.1%}'} ({time.perf_counter() - began:.0f} s)",
                flush=True,
            )
    print(f"\n{record['machine']}\n")
    print("\n".join(method_table(record)) + "\n")
    print("\n".join(coverage_table(record)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
