"""How often a configuration's seed-mean gain interval covers its true gain, at the shipped sizes.

    .venv/bin/python bench/seed_mean_calibration.py [--comparisons 2000] [--profiles local full]
        [--local FILE] [--full FILE] [--out FILE]

``search.confirm_seeds: k`` retrains the winner's configuration with k new seeds, scores each run on
the same test items against the same row, and prints the mean of the k runs' paired gains with the
interval of ``doctune_core.noise.seed_mean_gain``; so do the frontier, temperature and merge tables.
This benchmark measures that interval's coverage of the configuration's true gain, as
bench/gain_calibration.py does ``paired_gain``'s.

**Populations, at each profile's own sizes.** The full profile's rows resample the 64-step trained
row and its untrained converted start on the full validation parts (bench/results/
recorded_outcomes_64_steps.json: 185 title queries, 897 R8 documents, 157 passages, 50 needle and 50
passkey questions at 4,096 tokens each among 100 haystacks); the local profile's rows resample a
recording made at the local profile's own sizes (bench/results/recorded_outcomes_local.json, written
by ``bench/recorded_outcomes.py --profile local``: 60 title queries over 100 documents, 200 R8
documents, 60 passages, 30 needle and 30 passkey questions against 60 haystacks of 2,048 tokens).

**Runs of one configuration.** Each comparison draws the items once (with replacement, at the
profile's sizes; the probe's draws without replacement from the ten recorded): every run is scored
on them. Run i's trained row is the population moved (bench/gain_calibration.py's
``Population.moved_to``, its pairing kept) to the true gain plus a deviation d_i ~ N(0, sd), the
same d_i on every task of the part, so the part's gain moves by d_i; the moves are nested (the same
order of flipped items), so two runs differ on a few items, as two seeds of one configuration do.
The configuration's true gain is the population gains' mean over d ~ N(0, sd). ``sd`` is read from
the recipes' own recorded seeds (``recorded_seed_spreads``: the training frontier's rows at each of
its rounds, the dropout-temperature rows and the weight-merge row, 3 seeds each, scored on
validation): the smallest and the largest spread of the part's score across those rows.

**Methods.** ``variance at the observed gain``: ``seed_mean_gain`` as shipped until 2026-12-07 (the
items' term the mean of the runs' squared standard errors, each at its observed gain; the seeds' term
the runs' sample variance over k, k - 1 degrees of freedom; Welch-Satterthwaite's t on the sum);
``interval widths``: the items' term read from each run's printed interval (its half-width over t);
``interval widths, at least the seeds' t``: that, never narrower than the seeds' own t interval;
``score interval, at least the seeds' t``: each run's items' variance as ``paired_gain`` takes it (a
binary part's at every candidate gain, Tango's), the interval inverted from it, never narrower than
the seeds' own t interval: adopted, ``doctune_core.noise.seed_mean_gain`` since 2026-12-07. (Weerahandi's
generalized confidence interval over both components, *JASA* 88(423), 1993, and the two half-widths
combined as a root sum of squares each at its own degrees of freedom covered within 0.5 points of
``interval widths, at least the seeds' t`` in the rows they were run on, wider: not kept.)

Prints a Markdown table (coverage, Wilson's 95% interval, median width per row and method) and
writes every row to ``--out`` (bench/results/seed_mean_calibration.json) as it finishes; a run
started again goes on where it stopped. Validation parts only.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))

from bench.gain_calibration import (  # noqa: E402
    BAR,
    GAINS,
    LONG_TASKS,
    NEEDLE,
    OBJECTIVE,
    PASSAGE,
    PASSKEY,
    PROBE,
    TITLE,
    Population,
    outcomes_of,
    population,
    recorded_seed_spreads,
    wilson,
)
from bench.markdown import table  # noqa: E402
from doctune_core.noise import FEW_DISAGREED  # noqa: E402

PARTS = {"objective": OBJECTIVE, "long tasks pooled": LONG_TASKS}
# items per task and few-shot draws a round scores, per profile (search_spaces/docsplit_long.yaml's local
# limits; the full profile's EvalBudget defaults: every recorded validation item)
SIZES = {
    "local": ({TITLE: 60, PROBE: 200, PASSAGE: 60, NEEDLE: 30, PASSKEY: 30}, 3),
    "full": ({TITLE: None, PROBE: None, PASSAGE: None, NEEDLE: None, PASSKEY: None}, 5),
}
RUNS = (2, 3)  # search.confirm_seeds: the k runs a seed-mean gain is made of
STEP = 0.0025  # the grid of deviations a run's population is moved to (precomputed once per part and gain)
REACH = 0.25  # the grid's half-width: beyond 4 standard deviations of the largest recorded spread
METHODS = (
    "variance at the observed gain",
    "interval widths",
    "interval widths, at least the seeds' t",
    "score interval, at least the seeds' t",
)
ADOPTED = METHODS[3]  # doctune_core.noise.seed_mean_gain since 2026-12-07


@dataclasses.dataclass
class MovedGrid:
    """One task's population moved to ``target + d`` for each deviation d of the grid, with the same
    random order of moved items at every d (so that runs differ on a few items): the populations
    and the gain each reached."""

    deviations: np.ndarray
    populations: list[Population]
    gains: np.ndarray

    @classmethod
    def of(cls, population: Population, target: float, seed: int) -> MovedGrid:
        deviations = np.arange(-REACH, REACH + STEP / 2, STEP)
        moved = [population.moved_to(target + d, np.random.default_rng(seed)) for d in deviations]
        return cls(deviations, moved, np.array([p.gain() for p in moved]))

    def at(self, deviation: float) -> Population:
        return self.populations[int(np.argmin(np.abs(self.deviations - deviation)))]

    def expected_gain(self, sd: float) -> float:
        """The gain's mean over d ~ N(0, sd), on the grid (the configuration's true gain)."""
        weights = np.exp(-0.5 * (self.deviations / sd) ** 2) if sd > 0 else (self.deviations == 0).astype(float)
        return float(np.sum(weights * self.gains) / np.sum(weights))


def seed_mean_from_widths(gains, level: float = 0.95):
    """``seed_mean_gain`` with each run's items' term read from its printed interval: its larger
    half-width over t at its degrees of freedom (a binary part's interval holds every gain it cannot
    rule out, where its standard error at the observed gain may be 0)."""
    from doctune_core.noise import Gain, t_interval, t_quantile

    difference = float(np.mean([g.difference for g in gains]))
    if any(g.low is None for g in gains):
        return Gain(difference, None, None, level=level, seed_noise=True, undecided=gains[0].undecided, runs=len(gains))
    items_se = [
        max(g.difference - g.low, g.high - g.difference) / t_quantile(level, g.degrees_of_freedom) for g in gains
    ]
    items = (float(np.mean(np.square(items_se))), min(g.degrees_of_freedom for g in gains))
    seeds = (float(np.var([g.difference for g in gains], ddof=1)) / len(gains), len(gains) - 1)
    low, high, se, dof = t_interval(difference, [items, seeds], level)
    return Gain(difference, low, high, se, dof, level, seed_noise=True, runs=len(gains))


def seed_mean_from_widths_at_least_the_seeds_t(gains, level: float = 0.95):
    """``seed_mean_from_widths``, never narrower than the seeds' own t interval (their spread over
    sqrt(k), t at k - 1)."""
    from doctune_core.noise import t_quantile

    gain = seed_mean_from_widths(gains, level)
    if gain.low is None:
        return gain
    spread = float(np.std([g.difference for g in gains], ddof=1)) / math.sqrt(len(gains))
    half = max(gain.difference - gain.low, t_quantile(level, len(gains) - 1) * spread)
    return dataclasses.replace(gain, low=gain.difference - half, high=gain.difference + half)


def seed_mean_at_observed_variance(gains, level: float = 0.95):
    """``seed_mean_gain`` as shipped until 2026-12-07: the items' term the mean of the runs' squared
    standard errors, each at its observed gain, and Welch-Satterthwaite's t on the sum."""
    from doctune_core.noise import Gain, t_interval

    difference = float(np.mean([g.difference for g in gains]))
    if any(g.low is None for g in gains):
        return Gain(difference, None, None, level=level, seed_noise=True, undecided=gains[0].undecided, runs=len(gains))
    items = (float(np.mean([g.standard_error**2 for g in gains])), min(g.degrees_of_freedom for g in gains))
    seeds = (float(np.var([g.difference for g in gains], ddof=1)) / len(gains), len(gains) - 1)
    low, high, se, dof = t_interval(difference, [items, seeds], level)
    return Gain(difference, low, high, se, dof, level, seed_noise=True, runs=len(gains))


def comparison(grids: dict[str, MovedGrid], weights, sizes, draws, runs: int, sd: float, rng) -> tuple[dict, int]:
    """One configuration's ``runs`` runs on one draw of items: each method's interval (None: none
    printed), and the most items any run's rows scored apart."""
    from doctune_core.noise import paired_gain, seed_mean_gain

    some = {task: grid.populations[0] for task, grid in grids.items()}
    rows = {task: rng.integers(0, pop.size, sizes[task] or pop.size) for task, pop in some.items()}
    columns = (
        np.concatenate([[0], 1 + rng.choice(some[PROBE].a.shape[1] - 1, draws, replace=False)])
        if PROBE in some
        else None
    )

    def sample(pop: Population, task: str, row: str) -> np.ndarray:
        items = getattr(pop, row)[rows[task]]
        return items[:, columns] if pop.kind == "probe" else items

    theirs = {task: outcomes_of(pop.kind, sample(pop, task, "b")) for task, pop in some.items()}
    gains = []
    for deviation in rng.normal(0.0, sd, runs):
        moved = {task: grid.at(deviation) for task, grid in grids.items()}
        mine = {task: outcomes_of(pop.kind, sample(pop, task, "a")) for task, pop in moved.items()}
        gains.append(paired_gain(mine, theirs, weights))
    made = {
        "variance at the observed gain": seed_mean_at_observed_variance(gains),
        "interval widths": seed_mean_from_widths(gains),
        "interval widths, at least the seeds' t": seed_mean_from_widths_at_least_the_seeds_t(gains),
        "score interval, at least the seeds' t": seed_mean_gain(gains),
    }
    intervals = {method: None if g.low is None else (g.low, g.high) for method, g in made.items()}
    return intervals, made[ADOPTED].disagreed


def calibrate(
    pops: dict[str, Population], part: str, profile: str, runs: int, sd: float, target: float, args, seed: int
) -> dict:
    rng = np.random.default_rng(seed)
    weights = PARTS[part]
    sizes, draws = SIZES[profile]
    grids = {task: MovedGrid.of(pops[task], target, seed) for task in weights}
    total = sum(weights.values())
    truth = sum(w * grids[t].expected_gain(sd) for t, w in weights.items()) / total
    covered: dict[str, list[bool]] = {m: [] for m in METHODS}
    widths: dict[str, list[float]] = {m: [] for m in METHODS}
    disagreements = []
    for _ in range(args.comparisons):
        intervals, disagreed = comparison(grids, weights, sizes, draws, runs, sd, rng)
        disagreements.append(disagreed)
        for method, interval in intervals.items():
            if interval is not None:
                covered[method].append(interval[0] <= truth <= interval[1])
                widths[method].append(interval[1] - interval[0])
    row = {
        "part": part,
        "profile": profile,
        "runs": runs,
        "seed_sd": sd,
        "target": target,
        "true_gain": truth,
        "comparisons": args.comparisons,
        "items": {t: sizes[t] or pops[t].size for t in weights},
        "draws": draws if PROBE in weights else 0,
        # the items the runs' rows scored apart (the binary parts' where the part has some: the most in any
        # run), their median over comparisons and the share of comparisons with at most FEW_DISAGREED
        "median_disagreed": float(np.median(disagreements)),
        "few_disagreed": float(np.mean(np.asarray(disagreements) <= FEW_DISAGREED)),
        "methods": {},
    }
    for method, hits in covered.items():
        if not hits:
            row["methods"][method] = {"printed": 0}
            continue
        share = float(np.mean(hits))
        low, high = wilson(share, len(hits))
        row["methods"][method] = {
            "printed": len(hits) / args.comparisons,
            "coverage": share,
            "low": low,
            "high": high,
            "median_width": float(np.median(widths[method])),
        }
    return row


def settings(spreads: dict[str, dict[str, float]]) -> list[tuple[str, str, int, float]]:
    """(part, profile, runs, seed spread) of each row: every row is run at each true gain."""
    return [
        (part, profile, runs, sd)
        for profile in SIZES
        for part in PARTS
        for runs in RUNS
        for sd in sorted({min(spreads[part].values()), max(spreads[part].values())})
    ]


def _wilson_floor(method: dict) -> bool:
    """Whether a row's coverage holds the floor: at least 93%, or its Wilson interval reaching 93%."""
    return method["coverage"] >= BAR[0] or method["high"] >= BAR[0]


def summary_table(record: dict) -> list[str]:
    """Each method over every row with an interval: how many rows hold the floor (at least 93%, or the
    Wilson interval reaching it), the lowest and highest coverage, and the median over rows of its
    median width against the method shipped before (``METHODS[0]``)."""
    rows = []
    for method in METHODS:
        printed = [r for r in record["rows"] if r["methods"][method].get("printed")]
        found = [r["methods"][method] for r in printed]
        ratio = np.median(
            [m["median_width"] / r["methods"][METHODS[0]]["median_width"] for m, r in zip(found, printed)]
        )
        coverage = [m["coverage"] for m in found]
        held = sum(map(_wilson_floor, found))
        rows.append(
            [method, str(len(found)), str(held), f"{min(coverage):.1%}", f"{max(coverage):.1%}", f"{ratio:.2f}"]
        )
    header = ["method", "rows", "at least 93%", "lowest", "highest", "median width / before's"]
    return table(header, rows, numeric=range(1, 6))


def coverage_table(record: dict, adopted: str = ADOPTED) -> list[str]:
    """Every row: its setting and true gain (the one reached, where the population's bounds stopped
    it), the adopted method's coverage (Wilson's 95% interval; † under the floor) and median width,
    the method shipped before it beside them, and the items the runs' rows scored apart: the median
    over comparisons, and the share of comparisons with at most ``FEW_DISAGREED``."""
    rows = []
    for row in record["rows"]:
        mine, before = row["methods"][adopted], row["methods"][METHODS[0]]
        reached = abs(row["true_gain"] - row["target"]) > 0.002
        gain = f"{row['target']:g}" + (f" ({row['true_gain']:.3f})" if reached else "")
        mark = "" if _wilson_floor(mine) else " †"
        rows.append(
            [
                row["part"],
                row["profile"],
                str(row["runs"]),
                f"{row['seed_sd']:.4f}",
                gain,
                f"{mine['coverage']:.1%}{mark} ({mine['low']:.1%}–{mine['high']:.1%})",
                f"{mine['median_width']:.3f}",
                f"{before['coverage']:.1%}",
                f"{before['median_width']:.3f}",
                f"{row['median_disagreed']:g} ({row['few_disagreed']:.0%})",
            ]
        )
    header = ["part", "profile", "runs", "seed sd", "gain", "coverage", "width", "before", "width", "disagreed"]
    return table(header, rows, numeric=(2, 3, 4, 6, 7, 8, 9))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--comparisons", type=int, default=2000)
    parser.add_argument("--profiles", nargs="+", choices=tuple(SIZES), default=list(SIZES))
    parser.add_argument("--local", type=Path, default=ROOT / "bench" / "results" / "recorded_outcomes_local.json")
    parser.add_argument("--full", type=Path, default=ROOT / "bench" / "results" / "recorded_outcomes_64_steps.json")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "seed_mean_calibration.json")
    parser.add_argument("--adopted", choices=METHODS, default=ADOPTED)
    args = parser.parse_args(argv)
    spreads = recorded_seed_spreads(PARTS)
    record = json.loads(args.out.read_text()) if args.out.exists() else {"rows": []}
    record.setdefault("machine", f"{os.cpu_count()} CPUs, numpy {np.__version__}, {time.strftime('%Y-%m-%d')}")
    record["seed_spreads"] = spreads
    done = {(r["part"], r["profile"], r["runs"], r["seed_sd"], r["target"], r["comparisons"]) for r in record["rows"]}
    recordings = {profile: json.loads(getattr(args, profile).read_text()) for profile in args.profiles}
    for index, (part, profile, runs, sd) in enumerate(settings(spreads)):
        if profile not in args.profiles:
            continue
        pops = {task: population(recordings[profile], "converted", task, profile) for task in PARTS[part]}
        for target in GAINS:
            if (part, profile, runs, sd, target, args.comparisons) in done:
                continue  # a run started again goes on where it stopped
            began = time.perf_counter()
            row = calibrate(pops, part, profile, runs, sd, target, args, seed=1000 * index + int(100 * target))
            record["rows"].append(row)
            args.out.write_text(json.dumps(record, indent=1))
            cover = {m: f"{v['coverage']:.1%}" if v.get("printed") else "none" for m, v in row["methods"].items()}
            print(
                f"{part}, {profile}, {runs} runs, seed sd {sd:.4f}, gain {target}: {cover} "
                f"({time.perf_counter() - began:.0f} s)",
                flush=True,
            )
    print(f"\n{record['machine']}\n")
    print("\n".join(summary_table(record)) + "\n")
    print("\n".join(coverage_table(record, args.adopted)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
