"""How a few-shot probe's gain interval covers at the draws a profile ships, with the draws' variance
term as adopted and as it was before (the diagnosis of R8's rows in bench/RESULTS.md, "Recalibrated
on the shipped local profile's trained row" and "The draws' term at its clip, and two draws").

    .venv/bin/python bench/probe_draws.py [--comparisons 600] [--recorded FILE ...]

For each recorded population (bench/gain_calibration.py's, R8 over the converted base) moved to a
true gain of 0, 0.05 and 0.10, ``--comparisons`` comparisons at the local profile's size (200
documents, 3 of the 10 recorded draws), the full one's (the whole part, 5 draws) and at 2 draws (the
smoke profile's 64 documents, under ``evaluators.noise.MIN_DRAWS``), no seed term: the coverage and
median width of ``evaluators.noise.paired_gain``'s interval, with ``draw_variance`` as adopted (the
between-draw variance less the items' share it repeats, with Satterthwaite's degrees of freedom for
that difference, its uncertainty kept where the difference is clipped at 0), dropped at the clip (as
before: a term clipped to 0 added no uncertainty), with m - 1 degrees of freedom (as before that) and
plain (the between-draw variance over m, m - 1). Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import sys
from functools import partial
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))

# documents (None: the whole part), draws, and the profile whose population is drawn from
SIZES = {"local": (200, 3, "local"), "full": (None, 5, "full"), "2 draws": (64, 2, "local")}


def plain_draw_variance(a, b, items_of_mean: float) -> tuple[float, float]:
    """The between-draw variance of the per-draw gains over m, nothing taken out; m - 1."""
    if a.draws is None or b.draws is None or len(a.draws) < 2:
        return 0.0, 1.0
    m = len(a.draws)
    return float(np.var(np.asarray(a.draws) - np.asarray(b.draws), ddof=1)) / m, m - 1.0


def dropped_at_clip(adopted, a, b, items_of_mean: float) -> tuple[float, float]:
    """``adopted``'s term, but 0 (adding no uncertainty) where the net variance is clipped."""
    variance, dof = adopted(a, b, items_of_mean)
    return (0.0, 1.0) if dof < 1e-6 else (variance, dof)


def with_draws_dof(adopted, a, b, items_of_mean: float) -> tuple[float, float]:
    """``adopted``'s variance with m - 1 degrees of freedom, as before the calibration at 64 steps."""
    variance, _ = dropped_at_clip(adopted, a, b, items_of_mean)
    return variance, max(len(a.draws) - 1, 1) if a.draws is not None else 1.0


def coverage(population, documents: int, draws: int, comparisons: int, rng) -> tuple[float, float]:
    """The interval's coverage of the population's gain, and its median width."""
    import evaluators.noise as noise
    from bench.gain_calibration import outcomes_of
    from evaluators.noise import paired_gain

    rule = noise.MIN_DRAWS
    noise.MIN_DRAWS = min(rule, draws)  # the rule lifted, to show what it keeps from being printed
    truth = population.gain()
    hits, widths = [], []
    for _ in range(comparisons):
        rows = rng.integers(0, population.size, documents or population.size)
        columns = np.concatenate([[0], 1 + rng.choice(population.a.shape[1] - 1, draws, replace=False)])
        a, b = population.a[rows][:, columns], population.b[rows][:, columns]
        gain = paired_gain({"p": outcomes_of("probe", a)}, {"p": outcomes_of("probe", b)}, {"p": 1.0})
        hits.append(gain.low <= truth <= gain.high)
        widths.append(gain.high - gain.low)
    noise.MIN_DRAWS = rule
    return float(np.mean(hits)), float(np.median(widths))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--comparisons", type=int, default=600)
    parser.add_argument(
        "--recorded",
        nargs="+",
        type=Path,
        default=[ROOT / "bench/results/recorded_outcomes_64_steps.json", ROOT / "bench/results/recorded_outcomes.json"],
        help="populations (bench/recorded_outcomes.py); each cell: coverage (median width)",
    )
    args = parser.parse_args()
    import evaluators.noise as noise
    from bench.gain_calibration import PROBE, population

    adopted = noise.draw_variance
    variants = (adopted, partial(dropped_at_clip, adopted), partial(with_draws_dof, adopted), plain_draw_variance)
    print("| population | size | true gain | adopted | dropped at the clip | m - 1 | plain |")
    print("|---|---|---:|---|---|---|---|")
    for recorded in args.recorded:
        record = json.loads(recorded.read_text())
        for size, (documents, draws, profile) in SIZES.items():
            for target in (0.0, 0.05, 0.1):
                moved = population(record, "converted", PROBE, profile).moved_to(target, np.random.default_rng(1))
                cells = []
                for variance in variants:
                    noise.draw_variance = variance
                    share, width = coverage(moved, documents, draws, args.comparisons, np.random.default_rng(2))
                    cells.append(f"{share:.1%} ({width:.3f})")
                noise.draw_variance = adopted
                print(f"| {recorded.name} | {size} | {target:g} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
