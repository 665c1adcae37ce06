"""``python -m platform.report RUN_DIR``: (re)write a finished run's plots and report.html.

``python -m platform.report URI --to DIR`` does it for a run kept at a storage URI (a search's
``--storage``): the records the report reads are fetched (no checkpoint), the report is written
beside them, and the whole lands in DIR (new, or empty) only once it is complete; the storage at the
URI is left unchanged. Exit codes: 0 written, 2 bad input, with one message, 1 any other failure.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from doctune_core.logs import add_verbosity_options, show_on_console
from doctune_core.run_layout import REPORT_FILE
from platform.exit_codes import EXIT_BAD_INPUT, EXIT_OK, UsageError
from platform.report import write_reports
from platform.report.run import ReportError
from platform.rundir.layout import new_directory_problem


def _fetched(uri: str, into: Path) -> Path:
    """The run at ``uri``'s report records, fetched into ``into`` (ReportError naming bad input)."""
    from platform.rundir.storage import RunStorage

    try:
        storage = RunStorage.open_run(uri)
    except UsageError as err:
        raise ReportError(str(err)) from None
    try:
        storage.pull_records(into)
    except OSError as err:
        raise ReportError(f"fetching from {uri} failed ({str(err).splitlines()[0]}); run the command again") from None
    return into


def report_from_storage(uri: str, to: Path | None) -> list[Path]:
    """The report of the run kept at ``uri``, written in ``to`` with the records it reads; the paths
    written (as ``write_reports``). Fetched and written beside ``to``, then moved there whole."""
    if to is None:
        raise ReportError(f"{uri} is a storage URI: name a new or empty directory for its report with --to DIR")
    if problem := new_directory_problem("--to", to):
        raise ReportError(problem)
    target = to.resolve()
    try:
        staging = tempfile.TemporaryDirectory(
            prefix=".doctune-report-", dir=next(p for p in target.parents if p.exists())
        )
    except OSError as err:
        raise ReportError(f"--to {to}: cannot write beside it ({err.strerror}); name a directory elsewhere") from None
    with staging as staged:
        fetched = Path(staged) / "run"
        try:
            written = write_reports(_fetched(uri, fetched), kept_at=uri)
        except ReportError as err:  # said of the URI, not of the directory it was fetched into
            raise ReportError(str(err).replace(str(fetched), uri)) from None
        if target.is_dir():  # the empty directory --to named
            target.rmdir()
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(fetched, target)
    return [to / path.relative_to(fetched) for path in written]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m platform.report", description=f"Write a finished search's plots/ and {REPORT_FILE}."
    )
    parser.add_argument(
        "run_dir",
        help="a finished search's run directory (runs/<spec name> by default), or the storage URI its search "
        "kept a copy at (--storage: s3://bucket/prefix, gs://..., file://...)",
    )
    parser.add_argument(
        "--to", type=Path, help="for a storage URI: a new or empty directory to write the run's records and report"
    )
    add_verbosity_options(parser)
    args = parser.parse_args(argv)
    show_on_console(args.verbosity)
    try:
        if "://" in args.run_dir:
            written, run_dir = report_from_storage(args.run_dir, args.to), args.to
        elif args.to is not None:
            raise ReportError("--to is for a run at a storage URI; a run directory's report is written in it")
        else:
            run_dir = Path(args.run_dir)
            written = write_reports(run_dir)
    except ReportError as err:
        print(f"doctune: error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(f"doctune: report in {written[-1]} ({len(written) - 1} plots in {run_dir / 'plots'})")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
