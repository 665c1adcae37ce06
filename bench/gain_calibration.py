"""How often a gain's 95% interval covers the true gain, at the sizes the profiles ship.

    .venv/bin/python bench/gain_calibration.py [--comparisons 2000] [--rounds 400] [--only PART]
        [--recorded FILE] [--out FILE]

**Populations, from recorded runs.** ``--recorded`` (bench/results/recorded_outcomes.json, written by
bench/recorded_outcomes.py) holds, item by item on the validation parts, a trained checkpoint of the
default search and its two bases (the converted one and the one as given): the two comparisons a
search prints (``pair``). Each task's recorded pairs of outcomes are its population: binary acc@1
per question for needle and passkey (the 4,096-token haystacks a round scores; "a length" pools
the grid's lengths), nDCG@10 per query for the title and passage tasks, R8's documents with their
labels and the predictions of ten few-shot draws for the probe (macro-F1 over the draws).

**A known gain.** Each population is moved to a true gain of 0, 0.02, 0.05 or 0.10 keeping its
pairing: a continuous task adds the missing gain to the items where the two rows differ (ties stay
ties); a binary task (copied 20 times over, for a fine enough step) turns the trained row's misses
into hits, or its hits into misses, the discordant cells first; the probe turns a share of the
trained row's errors right (or its hits wrong) in every draw, the share found by bisection. The
true gain is the population's own, computed after the move.

**A comparison.** Each task's items are drawn from its population with replacement at the
profile's size (``SIZES``: the local profile's 60 queries, 200 documents over 3 draws, 11
questions; the full profile's whole validation parts, 5 draws, 50 questions), the probe's draws
without replacement from the ten. Seeds: the trained row's score on each task is off by a normal
deviation of that task's seed spread (``SEED_SD``, the long study's median over its six rows of the
standard deviation over 3 seeds), and the spread is estimated from ``seeds`` more runs (2 or 3), as
``search.confirm_seeds`` measures it; "none": no seed noise and none measured (the interval is then
this run's gain's).

**Methods.** ``paired t`` is the interval adopted (``evaluators.noise.paired_gain``: Satterthwaite's
degrees of freedom, Bonett-Price cells for binary parts, the seeds' variance with k - 1 degrees of
freedom, and "too few items to decide" by the rule fixed before this calibration). Beside it, on
the same comparisons: ``percentile`` (the interval before: items and draws resampled with
replacement, widened by sqrt(m / (m - 1)), a normal seed term of the estimated spread), ``BCa``
(Efron 1987: the same resamples, bias-corrected and accelerated from the rows' influence values),
``Bayesian`` (Rubin 1981: Dirichlet weights on items and draws, the same seed term) and, on a
single binary task, ``McNemar`` (the exact conditional interval: Clopper-Pearson on the discordant
pairs' split, scaled by their share; it has no seed term).

Prints a Markdown table (coverage with Wilson's 95% interval per row and method; "no interval" where
the rule prints none) and writes every row to ``--out`` (bench/results/gain_calibration.json) as it
finishes; a run started again goes on where it stopped.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from functools import partial
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))

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
    "local": ({TITLE: 60, PROBE: 200, PASSAGE: 60, NEEDLE: 11, PASSKEY: 11, LENGTH: 11}, 3),
    "full": ({TITLE: None, PROBE: None, PASSAGE: None, NEEDLE: 50, PASSKEY: 50, LENGTH: 50}, 5),
}
# one training run's standard deviation of each task's validation score: the median over the long
# study's six rows of the standard deviation over its 3 seeds (bench/study/long_study)
SEED_SD = {TITLE: 0.0037, PROBE: 0.0118, PASSAGE: 0.0105, NEEDLE: 0.0226, PASSKEY: 0.0391, LENGTH: 0.0226}
GAINS = (0.0, 0.02, 0.05, 0.10)
LONGEST = "len_4096"  # the needle and passkey stratum a round scores (haystacks: longest)
METHODS = ("paired t", "percentile", "BCa", "Bayesian", "McNemar")
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
        """The population at true gain ``target``, pairing kept (the module's docstring)."""
        if self.kind == "mean":
            a = self.a.astype(float).copy()
            differ = a != self.b
            if not differ.any():
                differ[:] = True
            a[differ] += (target - self.gain()) * len(a) / differ.sum()
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
    from evaluators.tasks.probe import draw_values, macro_f1

    return draw_values(items, 1, macro_f1)


def populations(recorded: dict, pair: str) -> dict[str, Population]:
    """Each task's population for ``pair`` (trained over ``converted`` or over ``base``)."""
    a_parts, b_parts = recorded["rows"]["trained"]["parts"], recorded["rows"][pair]["parts"]
    out = {}
    for task in (TITLE, PASSAGE):
        out[task] = Population("mean", np.array(a_parts[task]["items"], float), np.array(b_parts[task]["items"], float))
    out[PROBE] = Population("probe", np.array(a_parts[PROBE]["items"]), np.array(b_parts[PROBE]["items"]))
    for task in (NEEDLE, PASSKEY):
        a, b = a_parts[f"{task}@grid"], b_parts[f"{task}@grid"]
        rows = a["strata"][LONGEST]
        out[task] = Population("binary", np.array(a["items"])[rows], np.array(b["items"])[rows])
    grid_a, grid_b = a_parts[f"{NEEDLE}@grid"], b_parts[f"{NEEDLE}@grid"]
    out[LENGTH] = Population("binary", np.array(grid_a["items"]), np.array(grid_b["items"]))
    return out


def outcomes_of(kind: str, items: np.ndarray):
    """``Outcomes`` as the task builds them (a retrieval task's, a pairs task's, a probe's)."""
    from evaluators.tasks.base import Outcomes, mean_of_rows
    from evaluators.tasks.probe import macro_f1, macro_f1_influence, mean_over_draws, mean_over_draws_influence

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


def macro_f1_rounds(truth: np.ndarray, predicted: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Macro-F1 of each round's weighted rows at once, ``(rounds,)``: ``truth`` and ``predicted``
    ``(rounds, n)`` class codes, ``weights`` ``(rounds, n)`` (a resample's counts, or Dirichlet
    weights); the classes present in a round are those with weight in its truth or predictions."""
    rounds, classes = truth.shape[0], int(max(truth.max(), predicted.max())) + 1
    offset = np.arange(rounds)[:, None] * classes
    size = rounds * classes
    hits = np.bincount((offset + truth).ravel(), (weights * (truth == predicted)).ravel(), size)
    counts = np.bincount((offset + truth).ravel(), weights.ravel(), size)
    counts += np.bincount((offset + predicted).ravel(), weights.ravel(), size)
    hits, counts = hits.reshape(rounds, classes), counts.reshape(rounds, classes)
    present = counts > 1e-12
    f1 = np.divide(2 * hits, counts, out=np.zeros_like(hits), where=present)
    return f1.sum(axis=1) / present.sum(axis=1)


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
            return (weights * (self.a - self.b)).sum(axis=1) / weights.sum(axis=1)
        rounds = len(weights)
        truth = np.broadcast_to(self.a[:, 0], (rounds, self.n))
        values = [
            macro_f1_rounds(truth, np.broadcast_to(items[:, 1 + d], (rounds, self.n)), weights)
            for items in (self.a, self.b)
            for d in range(self.draws)
        ]
        return np.mean(values[: self.draws], axis=0) - np.mean(values[self.draws :], axis=0)

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
    return rng.multinomial(n, np.full(n, 1.0 / n), size=rounds).astype(float)


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


def comparison(pops: dict[str, Population], weights, sizes, draws, seeds: int, rng, rounds: int) -> dict:
    """One simulated comparison: each method's interval (None: none printed), shifted by this
    run's seed deviation, and the observed gain."""
    from evaluators.noise import SeedSpread, paired_gain

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
        runs = np.array([[rng.normal(0.0, SEED_SD[t]) for t in weights] for _ in range(seeds + 1)])
        combined = runs @ np.array(list(weights.values())) / total
        shift, spread = combined[0], SeedSpread(float(np.std(combined[1:], ddof=1)), seeds)
    observed = sum(w * samples[t].gain() for t, w in weights.items()) / total + shift
    gain = paired_gain(
        {t: outcomes_of(s.kind, s.a) for t, s in samples.items()},
        {t: outcomes_of(s.kind, s.b) for t, s in samples.items()},
        weights,
        spread,
    )
    intervals = {"paired t": None if gain.low is None else (gain.low + shift, gain.high + shift)}
    seed_term = rng.normal(0.0, spread.sd, rounds) if spread else 0.0
    plain = observed + resampled_gains(samples, weights, rng, rounds, bayesian=False) + seed_term
    intervals["percentile"] = tuple(np.percentile(plain, [2.5, 97.5]))
    intervals["BCa"] = bca(observed, plain, samples, weights)
    bayes = observed + resampled_gains(samples, weights, rng, rounds, bayesian=True) + seed_term
    intervals["Bayesian"] = tuple(np.percentile(bayes, [2.5, 97.5]))
    if len(weights) == 1 and samples[next(iter(weights))].kind == "binary":
        low, high = mcnemar(samples[next(iter(weights))])
        intervals["McNemar"] = (low + shift, high + shift)
    return intervals


def calibrate(recorded: dict, part: str, profile: str, pair: str, seeds: int, target: float, args, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    weights = PARTS[part]
    sizes, draws = SIZES[profile]
    pops = {task: pop.moved_to(target, rng) for task, pop in populations(recorded, pair).items() if task in weights}
    total = sum(weights.values())
    truth = sum(w * pops[t].gain() for t, w in weights.items()) / total
    covered: dict[str, list[bool]] = {}
    widths: dict[str, list[float]] = {}
    printed = 0
    for _ in range(args.comparisons):
        intervals = comparison(pops, weights, sizes, draws, seeds, rng, args.rounds)
        printed += intervals["paired t"] is not None
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
        for seeds in (0, 2, 3):
            for pair in ("converted", "base"):
                rows.append(("objective", profile, pair, seeds))
            rows.append(("long tasks pooled", profile, "converted", seeds))
        for part in (TITLE, PASSAGE, PROBE, NEEDLE, LENGTH):
            rows.append((part, profile, "converted", 3))
    return rows


def print_table(record: dict) -> None:
    print(f"\n{record['machine']}\n")
    shown = [m for m in METHODS if any(m in r["methods"] for r in record["rows"])]
    print("| part | profile | items (draws) | over | seeds | true gain | " + " | ".join(shown) + " |")
    print("|---|---|---|---|---|---:|" + "---|" * len(shown))
    for row in record["rows"]:
        items = ", ".join(str(n) for n in row["items"].values()) + (f" ({row['draws']})" if row["draws"] else "")
        seeds = f"{row['seeds']} runs" if row["seeds"] else "none"
        cells = []
        for method in shown:
            result = row["methods"].get(method)
            if method == "paired t" and row["interval_printed"] == 0:
                cells.append("no interval (too few items to decide)")
            elif result is None:
                cells.append("–")
            else:
                cells.append(f"{result['coverage']:.1%} ({result['low']:.1%}–{result['high']:.1%})")
        print(
            f"| {row['part']} | {row['profile']} | {items} | {row['pair']} | {seeds} | "
            f"{row['true_gain']:.3f} | " + " | ".join(cells) + " |"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--comparisons", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=400)
    parser.add_argument("--only", help="rows of this part alone (a name in PARTS)")
    parser.add_argument("--recorded", type=Path, default=ROOT / "bench" / "results" / "recorded_outcomes.json")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "gain_calibration.json")
    args = parser.parse_args(argv)
    recorded = json.loads(args.recorded.read_text())
    record = json.loads(args.out.read_text()) if args.out.exists() else {"rows": []}
    record.setdefault("machine", f"{os.cpu_count()} CPUs, numpy {np.__version__}, {time.strftime('%Y-%m-%d')}")
    key = lambda r: (r["part"], r["profile"], r["pair"], r["seeds"], r["target"], r["comparisons"])  # noqa: E731
    done = {key(r) for r in record["rows"]}
    for index, (part, profile, pair, seeds) in enumerate(settings()):
        if args.only and part != args.only:
            continue
        for target in GAINS:
            if (part, profile, pair, seeds, target, args.comparisons) in done:
                continue  # a run started again goes on where it stopped
            began = time.perf_counter()
            row = calibrate(recorded, part, profile, pair, seeds, target, args, seed=1000 * index + int(100 * target))
            record = json.loads(args.out.read_text()) if args.out.exists() else record  # rows another run wrote
            record["rows"].append(row)
            args.out.write_text(json.dumps(record, indent=1))
            adopted = row["methods"].get("paired t", {}).get("coverage")
            print(
                f"{part}, {profile}, over {pair}, seeds {seeds}, gain {target}: paired t "
                f"{'no interval' if adopted is None else f'{adopted:.1%}'}, percentile "
                f"{row['methods']['percentile']['coverage']:.1%} ({time.perf_counter() - began:.0f} s)",
                flush=True,
            )
    print_table(record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
