"""The command line: ``build`` a table by training, ``replay`` search methods on one, ``diagnose``
one (whole or still being built) without replaying."""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from bench import efficiency
from bench.efficiency.batches import cache_of
from bench.efficiency.compare import STARTUP_SECONDS, compare
from bench.efficiency.diagnostics import agreement, diagnostics
from bench.efficiency.methods import METHODS
from bench.efficiency.report import json_safe, markdown, plot
from bench.efficiency.table import load_table

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_METHODS = ("random:16", "grid:16", "tpe:16", "tpe_independent:16", "random_asha:32", "tpe_asha:32")
DEFAULT_OUT = ROOT / "bench" / "out" / "search_efficiency"


def _method(text: str) -> tuple[str, int]:
    name, _, count = text.partition(":")
    if name not in METHODS or not count.isdigit() or int(count) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected NAME:SAMPLES with NAME one of {', '.join(METHODS)}")
    return name, int(count)


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a positive integer")
    return int(text)


def _seconds(text: str) -> float:
    refused = argparse.ArgumentTypeError(f"{text!r}: expected a number of seconds, 0 or more")
    try:
        value = float(text)
    except ValueError:
        raise refused from None
    if not value >= 0:  # NaN too
        raise refused
    return value


def _replay_command(args: argparse.Namespace) -> int:
    table = load_table(args.table)
    samples = dict(args.methods)
    cache = None if args.no_cache else cache_of(args.cache or DEFAULT_OUT / "cache", table)
    began = time.perf_counter()
    result = compare(table, samples, args.batches, args.seeds, args.startup_seconds, cache, print, args.jobs)
    elapsed = time.perf_counter() - began
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{table.name}.json").write_text(json.dumps(json_safe(result), indent=1) + "\n")
    plot(result, args.out / f"{table.name}.png")
    print(
        f"\n{table.name}: {len(table.configs)} configurations x {table.rounds} rounds, "
        f"{args.batches} batch(es) of {args.seeds} seeds\n"
    )
    print(markdown(result))
    print(f"\ntook {elapsed:.1f} s; wrote {args.out / table.name}.json and .png")
    return 0


def _diagnose_command(args: argparse.Namespace) -> int:
    table = load_table(args.table, partial=args.partial)
    if not table.configs:
        print(f"{args.table} holds no configuration yet: nothing to diagnose", file=sys.stderr)
        return 2
    grid = math.prod(len(dimension.values) for dimension in table.space.values())
    result = {"table": table.name, "configurations": len(table.configs), "grid": grid, **diagnostics(table)}
    if args.against:
        result["against"] = {"table": args.against.stem, **agreement(table, load_table(args.against, partial=True))}
    print(json.dumps(json_safe(result), indent=1))
    return 0


def _build_command(args: argparse.Namespace) -> int:
    from bench.efficiency_table import build

    run_dir = args.run_dir or ROOT / "bench" / "out" / args.spec.stem
    table_path = args.table or ROOT / "bench" / "data" / f"{args.spec.stem}.csv"
    table = build(args.spec, run_dir, table_path, args.profile, train=not args.no_train)
    print(f"wrote {table} and {table.with_suffix('.json').name}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=efficiency.__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    replay_parser = commands.add_parser("replay", help="replay search methods on a recorded table")
    replay_parser.add_argument("--table", type=Path, required=True, help="NAME.csv (NAME.json beside it)")
    replay_parser.add_argument(
        "--methods", type=_method, nargs="+", default=[_method(m) for m in DEFAULT_METHODS], help="NAME:SAMPLES ..."
    )
    replay_parser.add_argument("--seeds", type=_positive, default=50, help="seeds per batch (batch 0: seeds 0..N-1)")
    replay_parser.add_argument(
        "--batches", type=_positive, default=1, help="independent batches of seeds, for the figures' spread"
    )
    replay_parser.add_argument(
        "--startup-seconds",
        type=_seconds,
        default=STARTUP_SECONDS,
        help=f"start-up charged to every trial (default {STARTUP_SECONDS}: bench/RESULTS.md, Search overhead)",
    )
    replay_parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    replay_parser.add_argument(
        "--cache", type=Path, help="where batches are kept between runs (default: bench/out/search_efficiency/cache)"
    )
    replay_parser.add_argument("--no-cache", action="store_true", help="replay every batch, keep none")
    replay_parser.add_argument(
        "--jobs", type=_positive, default=1, help="processes replaying the batches the cache lacks (with a cache)"
    )
    replay_parser.set_defaults(handler=_replay_command)
    diagnose_parser = commands.add_parser(
        "diagnose",
        help="a table's spread, scoring noise and validation-test rank correlations (no replay), as JSON",
    )
    diagnose_parser.add_argument("--table", type=Path, required=True, help="NAME.csv (NAME.json beside it)")
    diagnose_parser.add_argument(
        "--partial", action="store_true", help="a table still being built: the configurations it has so far"
    )
    diagnose_parser.add_argument(
        "--against",
        type=Path,
        help="another table of the same grid (OTHER.csv): how the configurations both hold agree across them",
    )
    diagnose_parser.set_defaults(handler=_diagnose_command)
    build_parser = commands.add_parser(
        "build", help="train every configuration of a grid spec (or resume), then write its table"
    )
    build_parser.add_argument("--spec", type=Path, required=True, help="a spec with sampler: grid and asha: null")
    build_parser.add_argument("--profile", default="local", choices=("full", "local", "smoke"))
    build_parser.add_argument("--run-dir", type=Path, help="default: bench/out/<spec name>")
    build_parser.add_argument("--table", type=Path, help="default: bench/data/<spec name>.csv")
    build_parser.add_argument(
        "--no-train", action="store_true", help="merge what the run directory holds into the table; train nothing"
    )
    build_parser.set_defaults(handler=_build_command)
    args = parser.parse_args(argv)
    return args.handler(args)
