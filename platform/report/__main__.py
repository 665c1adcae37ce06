"""``python -m platform.report RUN_DIR``: (re)write a finished run's plots and report.html (exit
codes: 0 written, 2 bad input, with one message, 1 any other failure)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from platform.common import EXIT_BAD_INPUT, EXIT_OK
from platform.report import write_reports
from platform.report.run import ReportError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m platform.report", description="Write a finished search's plots/ and report.html."
    )
    parser.add_argument("run_dir", type=Path, help="a finished search's run directory (runs/<spec name> by default)")
    args = parser.parse_args(argv)
    try:
        written = write_reports(args.run_dir)
    except ReportError as err:
        print(f"doctune: error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(f"doctune: report in {written[-1]} ({len(written) - 1} plots in {args.run_dir / 'plots'})")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
