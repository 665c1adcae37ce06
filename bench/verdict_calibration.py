"""How often the ranking's noise check (``doctune_core.noise.spread_test``) calls trials apart.

    .venv/bin/python bench/verdict_calibration.py [--searches 1000] [--rounds 300] [--out FILE]

Simulated searches, each a set of trials scored item by item on the same items: a shared item
difficulty (uniform on [0.2, 0.8]), each trial's own effect, and per-item noise (sd 0.15), the
objective the mean over items. For each setting (trials, items, planted effect), the share of
searches called "beyond noise" over ``--searches`` independent searches, with its 95% binomial
interval. Identical configurations measure the false-alarm rate (the bar: at most 7%); one
configuration better by 3 standard errors of a paired difference measures the power (the bar: at
least 80%). Writes ``--out`` (bench/results/verdict_calibration.json) as each setting ends and prints
it as a Markdown table (``calls_table``).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))

from bench.gain_calibration import wilson  # noqa: E402
from bench.markdown import table  # noqa: E402

NOISE = 0.15


def simulated_search(rng: np.random.Generator, effects: list[float], items: int) -> list[dict]:
    from doctune_core.outcomes import Outcomes, mean_of_rows

    difficulty = rng.uniform(0.2, 0.8, size=items)
    return [
        {"t": Outcomes({}, difficulty + effect + rng.normal(0, NOISE, size=items), mean_of_rows)} for effect in effects
    ]


def called_beyond_noise(trials: int, items: int, planted_se: float, searches: int, rounds: int, seed: int) -> float:
    from doctune_core.noise import joint_resamples, spread_test

    difference_se = math.sqrt(2) * NOISE / math.sqrt(items)
    effects = [planted_se * difference_se] + [0.0] * (trials - 1)
    rng = np.random.default_rng(seed)
    beyond = 0
    for search in range(searches):
        observed, resampled = joint_resamples(simulated_search(rng, effects, items), {"t": 1.0}, rounds, search)
        beyond += spread_test(observed, resampled).beyond_noise
    return beyond / searches


SETTINGS = [  # (trials, items, planted difference in standard errors of a paired difference)
    (2, 60, 0.0),
    (4, 60, 0.0),
    (8, 60, 0.0),
    (4, 20, 0.0),
    (2, 60, 3.0),
    (4, 60, 3.0),
    (8, 60, 3.0),
    (4, 20, 3.0),
]


def calls_table(record: dict) -> list[str]:
    """Each setting: the share of its searches called beyond noise, with Wilson's 95% interval."""
    rows = []
    for row in record["rows"]:
        low, high = wilson(row["called"], record["searches"])
        what = "none (identical)" if row["planted"] == 0 else f"{row['planted']:g} SE of a difference"
        rows.append([str(row["trials"]), str(row["items"]), what, f"{row['called']:.1%}", f"{low:.1%} to {high:.1%}"])
    header = ["trials", "items", "planted difference", "called beyond noise", "95% interval"]
    return table(header, rows, numeric=(0, 1, 3))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--searches", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "verdict_calibration.json")
    args = parser.parse_args(argv)
    record = {"searches": args.searches, "rounds": args.rounds, "rows": []}
    for seed, (trials, items, planted) in enumerate(SETTINGS):
        called = called_beyond_noise(trials, items, planted, args.searches, args.rounds, seed)
        record["rows"].append({"trials": trials, "items": items, "planted": planted, "called": called})
        args.out.write_text(json.dumps(record, indent=1))
        print(calls_table(record)[-1], flush=True)
    print("\n".join(calls_table(record)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
