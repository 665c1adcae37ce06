"""How often the paired bootstrap's 95% interval (``evaluators.noise.paired_bootstrap``) covers a known gain.

    .venv/bin/python bench/gain_calibration.py [--comparisons 2000] [--rounds 400] [--out FILE]

Simulated comparisons of a trained encoder (a) with an untrained one (b) on the default search's two
kinds of task, at the sizes measured here, with the three sources of noise a real comparison has:

- items: a retrieval task of 185 queries (the news titles' part) whose paired per-query difference
  has standard deviation 0.18 (bench/RESULTS.md, "Scoring parts sized to decide": sigma 0.180);
- draws: a few-shot probe of 400 test documents (R8's part) fitted on 10 draws, each document right
  or wrong per draw; each draw moves each encoder's accuracy by its own normal deviation
  (``--draw-sd``, 0.03: the size of R8's per-draw macro-F1 spread in the local search) on top of a
  deviation shared by both encoders;
- seeds: the trained encoder's score is one training run's, off its configuration's mean by a normal
  deviation (``--seed-sd``, 0.016: one seed's standard error of the recipe study's objective,
  docs/study.md).

The true gain is the gain over the population of items, draws and training seeds (0.02 on each task,
so the objective's is 0.02). Each row counts, over ``--comparisons`` independent comparisons, how
often the interval covers it, with Wilson's 95% interval on that share; the bar is 93-97%. "items
only" is the bootstrap before this calibration (draws held fixed, no seed term), kept as the
comparison. Prints a Markdown table and writes the rows to ``--out`` (bench/results/gain_calibration.json)
as each finishes; a run started again goes on where it stopped.
"""

from __future__ import annotations

import argparse
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

GAIN = 0.02
QUERIES, QUERY_SD = 185, 0.18
DOCUMENTS, DRAWS = 400, 10
SHARED_DRAW_SD = 0.03  # a draw's effect common to both encoders: cancels in the paired difference


def accuracy_over_draws(items: np.ndarray) -> float:
    """A probe's accuracy averaged over its draws (``evaluators.tasks.probe.mean_over_draws`` with
    ``accuracy`` and one truth column), in one vectorised step: every draw scores every document."""
    return float(np.mean(items[:, 1:] == items[:, :1]))


def comparison(rng: np.random.Generator, draw_sd: float, seed_sd: float) -> tuple[dict, dict]:
    """One simulated comparison: each encoder's outcomes on the retrieval task ``r`` and the probe ``p``."""
    from evaluators.tasks.base import Outcomes, mean_of_rows

    run = rng.normal(0.0, seed_sd) if seed_sd else 0.0  # the trained encoder's training run
    base = rng.uniform(0.2, 0.8, QUERIES)
    retrieval_a = base + GAIN + run + rng.normal(0.0, QUERY_SD, QUERIES)
    difficulty = rng.uniform(0.3, 0.7, DOCUMENTS)
    shared = rng.normal(0.0, SHARED_DRAW_SD, DRAWS)
    luck = rng.uniform(size=(DOCUMENTS, DRAWS))  # one document's chance in one draw, the same for both

    def probe(shift: float) -> Outcomes:
        p = difficulty[:, None] + shift + shared[None, :] + rng.normal(0.0, draw_sd, DRAWS)[None, :]
        correct = (luck < p).astype(np.int32)
        items = np.column_stack([np.ones(DOCUMENTS, dtype=np.int32), correct])  # truth 1, then each draw
        return Outcomes({}, items, accuracy_over_draws, correct.mean(axis=0), draw_width=1)

    a = {"r": Outcomes({}, retrieval_a, mean_of_rows), "p": probe(GAIN + run)}
    b = {"r": Outcomes({}, base, mean_of_rows), "p": probe(0.0)}
    return a, b


def items_only(outcomes: dict) -> dict:
    """The same outcomes with the probe's draws held fixed (the bootstrap before the calibration)."""
    from evaluators.tasks.base import Outcomes

    return {t: Outcomes(o.scores, o.items, o.statistic, ids=o.ids) for t, o in outcomes.items()}


def coverage(method: str, draw_sd: float, seed_sd: float, comparisons: int, rounds: int, seed: int) -> dict:
    from evaluators.noise import paired_bootstrap

    rng = np.random.default_rng(seed)
    covered, widths, beyond = 0, [], 0
    for i in range(comparisons):
        a, b = comparison(rng, draw_sd, seed_sd)
        if method == "items only":
            a, b = items_only(a), items_only(b)
        given = seed_sd if method == "items, draws and seeds" else None
        gain = paired_bootstrap(a, b, {"r": 1.0, "p": 1.0}, rounds=rounds, seed=i, seed_sd=given)
        covered += gain.low <= GAIN <= gain.high
        beyond += gain.beyond_noise
        widths.append(gain.high - gain.low)
    share = covered / comparisons
    low, high = wilson(share, comparisons)
    return {
        "method": method,
        "draw_sd": draw_sd,
        "seed_sd": seed_sd,
        "comparisons": comparisons,
        "rounds": rounds,
        "coverage": share,
        "coverage_low": low,
        "coverage_high": high,
        "median_width": float(np.median(widths)),
        "called_beyond_noise": beyond / comparisons,
    }


def wilson(share: float, n: int) -> tuple[float, float]:
    """Wilson's 95% interval of a binomial share."""
    z = 1.959964
    centre = (share + z**2 / (2 * n)) / (1 + z**2 / n)
    half = z * math.sqrt(share * (1 - share) / n + z**2 / (4 * n**2)) / (1 + z**2 / n)
    return centre - half, centre + half


def settings(draw_sd: float, seed_sd: float) -> list[tuple[str, float, float]]:
    """(method, draw sd, seed sd) of each row: the calibrated bootstrap and the one before it, without
    and with seed noise, and the calibrated one where seed noise exists but was not measured."""
    return [
        ("items only", draw_sd, 0.0),
        ("items and draws", draw_sd, 0.0),
        ("items only", draw_sd, seed_sd),
        ("items and draws", draw_sd, seed_sd),
        ("items, draws and seeds", draw_sd, seed_sd),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--comparisons", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=400)
    parser.add_argument("--draw-sd", type=float, default=0.03)
    parser.add_argument("--seed-sd", type=float, default=0.016)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "gain_calibration.json")
    args = parser.parse_args(argv)
    record = json.loads(args.out.read_text()) if args.out.exists() else {"rows": []}
    record["machine"] = f"{os.cpu_count()} CPUs, numpy {np.__version__}, {time.strftime('%Y-%m-%d')}"
    done = {(r["method"], r["draw_sd"], r["seed_sd"], r["comparisons"], r["rounds"]) for r in record["rows"]}
    for seed, (method, draw_sd, seed_sd) in enumerate(settings(args.draw_sd, args.seed_sd)):
        if (method, draw_sd, seed_sd, args.comparisons, args.rounds) in done:
            continue  # a run started again goes on where it stopped
        record["rows"].append(coverage(method, draw_sd, seed_sd, args.comparisons, args.rounds, seed))
        args.out.write_text(json.dumps(record, indent=1))
        print(f"{method}, seed sd {seed_sd}: {record['rows'][-1]['coverage']:.1%}", flush=True)
    print(f"\n{record['machine']}\n")
    print(
        "| interval from | seed noise | coverage of the true gain | 95% interval | median width | called beyond noise |"
    )
    print("|---|---|---:|---|---:|---:|")
    for row in record["rows"]:
        seeds = f"sd {row['seed_sd']}" if row["seed_sd"] else "none"
        print(
            f"| {row['method']} | {seeds} | {row['coverage']:.1%} | {row['coverage_low']:.1%} to "
            f"{row['coverage_high']:.1%} | {row['median_width']:.4f} | {row['called_beyond_noise']:.1%} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
