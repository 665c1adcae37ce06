"""How often a configuration's seed-mean gain interval covers its true gain, at the shipped sizes.

    .venv/bin/python bench/seed_mean_calibration.py [--comparisons 2000] [--profiles local full]
        [--local FILE] [--full FILE] [--out FILE]

``search.confirm_seeds: k`` retrains the winner's configuration with k new seeds, scores each run on
the same test items against the same row, and prints the mean of the k runs' paired gains with the
interval of ``evaluators.noise.seed_mean_gain``; so do the frontier, temperature and merge tables.
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
the runs' sample variance over k, k - 1 degrees of freedom); ``interval widths``: the same with each
run's items' term read from its own printed interval (its half-width over t: a binary part's interval
inverted at every candidate gain, Tango's, so a part whose rows never disagree keeps the width its size
has earned); ``half-widths combined``: the items' and the seeds' half-widths, each at its own degrees
of freedom, combined as a root sum of squares (the seeds' t at k - 1 whatever the items' size).
Weerahandi's generalized confidence interval over both components (*JASA* 88(423), 1993) covered
within 0.2 points of it in the six rows it was run on, at four times the cost: not kept. ``at least
the seeds' t``: ``interval widths``, never narrower than the seeds' own t interval.

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
    wilson,
)

PARTS = {"objective": OBJECTIVE, "long tasks pooled": LONG_TASKS}
# items per task and few-shot draws a round scores, per profile (search_spaces/docsplit_long.yaml's local
# limits; the full profile's EvalBudget defaults: every recorded validation item)
SIZES = {
    "local": ({TITLE: 60, PROBE: 200, PASSAGE: 60, NEEDLE: 30, PASSKEY: 30}, 3),
    "full": ({TITLE: None, PROBE: None, PASSAGE: None, NEEDLE: None, PASSKEY: None}, 5),
}
RUNS = (2, 3)  # search.confirm_seeds: the k runs a seed-mean gain is made of
# the recorded studies whose rows' seeds give the spreads (bench/study/<study>/runs/<row>/seed<k>/result.json)
STUDIES = ("training_frontier", "dropout_temperature", "weight_merge")
STEP = 0.0025  # the grid of deviations a run's population is moved to (precomputed once per part and gain)
REACH = 0.25  # the grid's half-width: beyond 4 standard deviations of the largest recorded spread
METHODS = ("variance at the observed gain", "interval widths", "half-widths combined", "at least the seeds' t")


def recorded_seed_spreads(studies: tuple[str, ...] = STUDIES) -> dict[str, dict[str, float]]:
    """Each part's seed spread in every recorded row: part -> row -> the sample standard deviation
    over the row's seeds of the part's validation score (the objective's weights), a row with scoring
    rounds once per round."""
    spreads: dict[str, dict[str, float]] = {part: {} for part in PARTS}
    for study in studies:
        for row in sorted((ROOT / "bench" / "study" / study / "runs").iterdir()):
            seeds = [json.loads(p.read_text()) for p in sorted(row.glob("seed*/result.json"))]
            rounds = seeds[0].get("rounds") or {"": None}
            for step in rounds:
                scores = [s["rounds"][step] if step else s["scores"] for s in seeds]
                name = f"{study}: {row.name}" + (f" at {step} steps" if step else "")
                for part, weights in PARTS.items():
                    values = [
                        sum(w * s[t]["val"]["main"] for t, w in weights.items()) / sum(weights.values()) for s in scores
                    ]
                    spreads[part][name] = float(np.std(values, ddof=1))
    return spreads


def recorded_population(recorded: dict, task: str, profile: str) -> Population:
    """``task``'s population: the trained row over the untrained converted one, as recorded at
    ``profile``'s sizes (the local recording holds the round's needle and passkey parts; the full one
    their whole grid, whose 4,096-token stratum a round scores)."""
    a_parts, b_parts = recorded["rows"]["trained"]["parts"], recorded["rows"]["converted"]["parts"]
    if task in (TITLE, PASSAGE):
        return Population("mean", np.array(a_parts[task]["items"], float), np.array(b_parts[task]["items"], float))
    if task == PROBE:
        return Population("probe", np.array(a_parts[task]["items"]), np.array(b_parts[task]["items"]))
    name = task if task in a_parts else f"{task}@grid"
    a, b = np.array(a_parts[name]["items"], float), np.array(b_parts[name]["items"], float)
    if name != task:
        rows = np.array(a_parts[name]["strata"]["len_2049to4096"])
        a, b = a[rows], b[rows]
    return Population("binary", a, b)


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
    from evaluators.noise import Gain, _t_quantile, t_interval

    difference = float(np.mean([g.difference for g in gains]))
    if any(g.low is None for g in gains):
        return Gain(difference, None, None, level=level, seed_noise=True, undecided=gains[0].undecided, runs=len(gains))
    items_se = [
        max(g.difference - g.low, g.high - g.difference) / _t_quantile(level, g.degrees_of_freedom) for g in gains
    ]
    items = (float(np.mean(np.square(items_se))), min(g.degrees_of_freedom for g in gains))
    seeds = (float(np.var([g.difference for g in gains], ddof=1)) / len(gains), len(gains) - 1)
    low, high, se, dof = t_interval(difference, [items, seeds], level)
    return Gain(difference, low, high, se, dof, level, seed_noise=True, runs=len(gains))


def seed_mean_from_half_widths(gains, level: float = 0.95):
    """The seeds' and the items' half-widths combined as a root sum of squares, each at its own
    degrees of freedom: the seeds' t at k - 1 on the runs' spread over sqrt(k), the items' t at the
    runs' smallest on the root mean square of their standard errors (read from their printed
    intervals, as ``seed_mean_from_widths``). Where the seeds dominate it is their exact t interval;
    Welch-Satterthwaite's degrees of freedom for a component estimated from 1 or 2 runs are too many
    whenever its sample variance comes out small, and the interval then covers too little."""
    from evaluators.noise import Gain, _combined, _t_quantile

    difference = float(np.mean([g.difference for g in gains]))
    if any(g.low is None for g in gains):
        return Gain(difference, None, None, level=level, seed_noise=True, undecided=gains[0].undecided, runs=len(gains))
    t = [_t_quantile(level, g.degrees_of_freedom) for g in gains]
    items_se = float(
        np.sqrt(np.mean([(max(g.difference - g.low, g.high - g.difference) / q) ** 2 for g, q in zip(gains, t)]))
    )
    items_dof = min(g.degrees_of_freedom for g in gains)
    seeds_var = float(np.var([g.difference for g in gains], ddof=1)) / len(gains)
    half = math.hypot(
        _t_quantile(level, items_dof) * items_se, _t_quantile(level, len(gains) - 1) * math.sqrt(seeds_var)
    )
    se, dof = _combined([(items_se**2, items_dof), (seeds_var, len(gains) - 1)])
    return Gain(difference, difference - half, difference + half, se, dof, level, seed_noise=True, runs=len(gains))


def seed_mean_at_least_the_seeds_t(gains, level: float = 0.95):
    """``seed_mean_from_widths``'s interval, never narrower than the seeds' own t interval (their
    spread over sqrt(k), t at k - 1 degrees of freedom): where the seeds dominate, their exact t
    interval; elsewhere Welch-Satterthwaite's, unless a seeds' spread from so few runs asks for more."""
    from evaluators.noise import _t_quantile

    gain = seed_mean_from_widths(gains, level)
    if gain.low is None:
        return gain
    seeds = (
        _t_quantile(level, len(gains) - 1)
        * float(np.std([g.difference for g in gains], ddof=1))
        / math.sqrt(len(gains))
    )
    half = max(gain.difference - gain.low, seeds)
    return dataclasses.replace(gain, low=gain.difference - half, high=gain.difference + half)


def comparison(grids: dict[str, MovedGrid], weights, sizes, draws, runs: int, sd: float, rng) -> dict:
    """One configuration's ``runs`` runs on one draw of items: each method's interval (None: none printed)."""
    from evaluators.noise import paired_gain, seed_mean_gain

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
        "variance at the observed gain": seed_mean_gain(gains),
        "interval widths": seed_mean_from_widths(gains),
        "half-widths combined": seed_mean_from_half_widths(gains),
        "at least the seeds' t": seed_mean_at_least_the_seeds_t(gains),
    }
    return {method: None if g.low is None else (g.low, g.high) for method, g in made.items()}


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
    for _ in range(args.comparisons):
        for method, interval in comparison(grids, weights, sizes, draws, runs, sd, rng).items():
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


def print_table(record: dict, adopted: str) -> None:
    """The coverage of each row at each true gain: the adopted method's (bold, † outside 93-97%), its
    Wilson interval and median width, beside the method shipped before it."""
    print(f"\n{record['machine']}\n")
    print(f"| part | profile | runs | seed sd | {' | '.join(f'gain {g:g}' for g in GAINS)} |")
    print("|---|---|---|---|" + "---|" * len(GAINS))
    rows = record["rows"]
    for setting in dict.fromkeys((r["part"], r["profile"], r["runs"], r["seed_sd"]) for r in rows):
        found = {r["target"]: r for r in rows if (r["part"], r["profile"], r["runs"], r["seed_sd"]) == setting}
        cells = []
        for target in GAINS:
            row = found.get(target)
            if row is None:
                cells.append("–")
                continue
            mine, before = row["methods"][adopted], row["methods"][METHODS[0]]
            if not mine.get("printed"):
                cells.append("no interval")
                continue
            mark = "" if BAR[0] <= mine["coverage"] else " †"
            reached = f"; reached {row['true_gain']:.3f}" if abs(row["true_gain"] - target) > 0.002 else ""
            cells.append(
                f"**{mine['coverage']:.1%}**{mark} ({mine['low']:.1%}–{mine['high']:.1%}), width "
                f"{mine['median_width']:.3f}; before {before['coverage']:.1%}, width "
                f"{before['median_width']:.3f}{reached}"
            )
        part, profile, runs, sd = setting
        print(f"| {part} | {profile} | {runs} | {sd:.4f} | " + " | ".join(cells) + " |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--comparisons", type=int, default=2000)
    parser.add_argument("--profiles", nargs="+", choices=tuple(SIZES), default=list(SIZES))
    parser.add_argument("--local", type=Path, default=ROOT / "bench" / "results" / "recorded_outcomes_local.json")
    parser.add_argument("--full", type=Path, default=ROOT / "bench" / "results" / "recorded_outcomes_64_steps.json")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "seed_mean_calibration.json")
    parser.add_argument("--adopted", choices=METHODS, default=METHODS[2])
    args = parser.parse_args(argv)
    spreads = recorded_seed_spreads()
    record = json.loads(args.out.read_text()) if args.out.exists() else {"rows": []}
    record.setdefault("machine", f"{os.cpu_count()} CPUs, numpy {np.__version__}, {time.strftime('%Y-%m-%d')}")
    record["seed_spreads"] = spreads
    done = {(r["part"], r["profile"], r["runs"], r["seed_sd"], r["target"], r["comparisons"]) for r in record["rows"]}
    recordings = {profile: json.loads(getattr(args, profile).read_text()) for profile in args.profiles}
    for index, (part, profile, runs, sd) in enumerate(settings(spreads)):
        if profile not in args.profiles:
            continue
        pops = {task: recorded_population(recordings[profile], task, profile) for task in PARTS[part]}
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
    print_table(record, args.adopted)
    return 0


if __name__ == "__main__":
    sys.exit(main())
