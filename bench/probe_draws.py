"""How a few-shot probe's gain interval covers at the draws a profile ships, with the draws' variance
term as adopted and as it was before (bench/RESULTS.md, "A few-shot probe's draws").

    .venv/bin/python bench/probe_draws.py [--comparisons 600] [--recorded FILE ...] [--out FILE]

For each recorded population (bench/gain_calibration.py's, R8 over the converted base) moved to a
true gain of 0, 0.05 and 0.10, ``--comparisons`` comparisons at the local profile's size (200
documents, 3 of the 10 recorded draws), the full one's (the whole part, 5 draws) and at 2 draws (the
smoke profile's 64 documents, under ``doctune_core.noise.MIN_DRAWS``), no seed term: the coverage and
median width of ``doctune_core.noise.paired_gain``'s interval, with ``draw_variance`` as adopted (the
between-draw variance less the items' share it repeats, with Satterthwaite's degrees of freedom for
that difference, its uncertainty kept where the difference is clipped at 0), dropped at the clip (as
before: a term clipped to 0 added no uncertainty), with m - 1 degrees of freedom (as before that) and
plain (the between-draw variance over m, m - 1). A comparison whose rows' items left its interval no
width prints none (``doctune_core.noise``: the items' agreement instead): the share printed is kept
beside each coverage. Writes ``--out`` (bench/results/probe_draws.json) and prints it as a Markdown
table (``coverage_table``).
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


def coverage(population, documents: int, draws: int, comparisons: int, rng) -> dict[str, float]:
    """The interval's coverage of the population's gain over the comparisons that print one, its
    median width, and the share of comparisons that print one."""
    import doctune_core.noise.rules as noise
    from bench.gain_calibration import outcomes_of
    from doctune_core.noise import paired_gain

    rule = noise.MIN_DRAWS
    noise.MIN_DRAWS = min(rule, draws)  # the rule lifted, to show what it keeps from being printed
    truth = population.gain()
    hits, widths = [], []
    for _ in range(comparisons):
        rows = rng.integers(0, population.size, documents or population.size)
        columns = np.concatenate([[0], 1 + rng.choice(population.a.shape[1] - 1, draws, replace=False)])
        a, b = population.a[rows][:, columns], population.b[rows][:, columns]
        gain = paired_gain({"p": outcomes_of("probe", a)}, {"p": outcomes_of("probe", b)}, {"p": 1.0})
        if gain.low is not None and gain.high is not None:
            hits.append(gain.low <= truth <= gain.high)
            widths.append(gain.high - gain.low)
    noise.MIN_DRAWS = rule
    return {
        "coverage": float(np.mean(hits)),
        "median_width": float(np.median(widths)),
        "printed": len(hits) / comparisons,
    }


VARIANTS = ("adopted", "dropped at the clip", "m - 1", "plain")


# the recorded populations by the trained row they hold (bench/recorded_outcomes.py)
POPULATIONS = {"recorded_outcomes_64_steps.json": "64-step row", "recorded_outcomes.json": "16-step row"}


def coverage_table(record: dict) -> list[str]:
    """Each row's coverage (median width) by variant, and the share of comparisons printing an
    interval (the rest leave it no width: their items agreed)."""
    from bench.markdown import table

    def cell(found: dict) -> str:
        return f"{found['coverage']:.1%} ({found['median_width']:.3f})"

    rows = [
        [
            POPULATIONS.get(row["population"], row["population"]),
            row["size"],
            f"{row['target']:g}",
            *(cell(row["variants"][v]) for v in VARIANTS),
            f"{row['variants'][VARIANTS[0]]['printed']:.0%}",
        ]
        for row in record["rows"]
    ]
    return table(["population", "size", "true gain", *VARIANTS, "printed"], rows, numeric=(2, 7))


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
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "probe_draws.json")
    args = parser.parse_args()
    import doctune_core.noise.rules as noise
    from bench.gain_calibration import PROBE, population

    adopted = noise.draw_variance
    variants = (adopted, partial(dropped_at_clip, adopted), partial(with_draws_dof, adopted), plain_draw_variance)
    record = {"comparisons": args.comparisons, "rows": []}
    for recorded in args.recorded:
        populations = json.loads(recorded.read_text())
        for size, (documents, draws, profile) in SIZES.items():
            for target in (0.0, 0.05, 0.1):
                moved = population(populations, "converted", PROBE, profile).moved_to(target, np.random.default_rng(1))
                row = {"population": recorded.name, "size": size, "target": target, "variants": {}}
                for name, variance in zip(VARIANTS, variants):
                    noise.draw_variance = variance
                    row["variants"][name] = coverage(
                        moved, documents, draws, args.comparisons, np.random.default_rng(2)
                    )
                noise.draw_variance = adopted
                record["rows"].append(row)
                args.out.write_text(json.dumps(record, indent=1))
                print(coverage_table(record)[-1], flush=True)
    print("\n".join(coverage_table(record)))


if __name__ == "__main__":
    main()
