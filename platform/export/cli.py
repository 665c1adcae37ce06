"""``python -m platform.export RUN_DIR|URI [--trial ID] --to DIR``

Exports one trial of a finished search: its encoder as an ordinary transformers model directory
that sentence-transformers also loads with the trial's pooling and L2 normalisation, plus
``doctune.json`` (what it is) and ``README.md`` (a model card). A storage URI (the search's
``--storage``, platform/rundir/storage.py) in place of the run directory exports from the run kept
there, fetching only its records and the trial's checkpoint. Exit codes: 0 success, 2 bad input
(one message naming what is wrong and how to fix it; nothing written), 1 any other failure.
"""

from __future__ import annotations

import argparse
import contextlib
import shlex
import sys
import tempfile
from pathlib import Path

from doctune_core.logs import add_verbosity_options, show_on_console
from doctune_core.run_files import RunFiles
from doctune_core.run_layout import LEADERBOARD_FILE, SEARCH_RECORD
from evaluators.leaderboard import Leaderboard, LeaderboardRow, is_baseline
from evaluators.references import winner
from platform.exit_codes import EXIT_BAD_INPUT, EXIT_OK, UsageError
from platform.export import export_trial
from platform.export.record import ExportError, SearchRecord
from platform.rundir.layout import new_directory_problem
from platform.rundir.storage import RunStorage, run_files_of
from trainers.checkpoint import recorded_checkpoint


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m platform.export", description=__doc__.split("\n\n")[1])
    parser.add_argument(
        "run_dir",
        help="a finished search's run directory (runs/<spec name> by default), or the storage URI it was kept at",
    )
    parser.add_argument("--trial", help="trial id from the leaderboard; default: the best trial")
    parser.add_argument("--to", type=Path, required=True, help="directory to write (new, or empty)")
    add_verbosity_options(parser)
    return parser.parse_args(argv)


def check_inputs(
    run_dir: Path, trial: str | None, to: Path, files: RunFiles | None = None
) -> tuple[LeaderboardRow, SearchRecord, str, Path]:
    """(row, search, checkpoint, target) for an export, or ExportError saying what is wrong: the
    checkpoint by its name in the run's files, ``files`` (by default where ``run_dir``'s search kept
    its trials: ``platform.rundir.storage.run_files_of``)."""
    row, search = choose_row(run_dir, trial)
    checkpoint = _locate_checkpoint(row, files or run_files_of(run_dir))
    return row, search, checkpoint, check_target(to)


def check_target(to: Path) -> Path:
    """``--to`` resolved, if an export may write there (ExportError otherwise)."""
    if problem := new_directory_problem("--to", to):
        raise ExportError(problem)
    return to.resolve()


def choose_row(run_dir: Path, trial: str | None) -> tuple[LeaderboardRow, SearchRecord]:
    """The leaderboard row to export (``trial``, else the winner) and the search's record."""
    if not run_dir.is_dir():
        raise ExportError(
            f"run directory {run_dir} does not exist; name the directory a search wrote (runs/<spec name>)"
        )
    if not (run_dir / SEARCH_RECORD).exists():
        raise ExportError(f"{run_dir} holds no {SEARCH_RECORD}: not a doctune run directory")
    try:
        search = SearchRecord.read(run_dir)
    except (KeyError, TypeError, ValueError) as err:
        raise ExportError(
            f"{run_dir}/{SEARCH_RECORD} is not one this doctune wrote ({type(err).__name__}: {err})"
        ) from None
    if not (run_dir / LEADERBOARD_FILE).exists():
        raise ExportError(
            f"{run_dir} holds no {LEADERBOARD_FILE}: its search has not finished; finish it with "
            f"{search.command} --run-dir {shlex.quote(str(run_dir))} --resume"
        )
    try:
        rows = list(Leaderboard.read(run_dir).rows)
    except (KeyError, TypeError, ValueError) as err:
        raise ExportError(f"{run_dir}/{LEADERBOARD_FILE} is not one this doctune wrote ({err})") from None
    trials = [r.trial for r in rows if not is_baseline(r)]
    if trial is None:
        row = winner(rows)
        if row is None:
            raise ExportError(f"no trial in {run_dir}/{LEADERBOARD_FILE} has a score; there is nothing to export")
    else:
        row = next((r for r in rows if r.trial == trial), None)
        if row is None:
            raise ExportError(f"no trial {trial!r} in {run_dir}/{LEADERBOARD_FILE}; known: {', '.join(trials)}")
        if is_baseline(row):
            raise ExportError(
                f"{row.trial!r} is the untouched base model ({row.checkpoint}), not a trial; choose one of: "
                f"{', '.join(trials)}"
            )
        if row.checkpoint is None:
            raise ExportError(f"trial {trial!r} has no checkpoint ({row.status}); choose another: {', '.join(trials)}")
    return row, search


def _fetch_records(uri: str, into: Path) -> RunStorage:
    """The run kept at ``uri``, its records (``search.json``, ``leaderboard.json``) fetched into ``into``."""
    try:
        storage = RunStorage.open_run(uri)
    except UsageError as err:
        raise ExportError(str(err)) from None
    storage.pull(into, under=(SEARCH_RECORD, LEADERBOARD_FILE))
    if not (into / LEADERBOARD_FILE).is_file():
        raise ExportError(
            f"{uri} holds no {LEADERBOARD_FILE}: its search has not finished; finish it with its search command "
            f"and --resume --storage {uri}"
        )
    return storage


def _locate_checkpoint(row: LeaderboardRow, files: RunFiles) -> str:
    """The row's checkpoint, by its name in the run's files (where the run directory was moved or
    fetched, or the trials are in the run's storage)."""
    checkpoint = recorded_checkpoint(row.checkpoint, row.trial)
    # a round whose weights train.keep_checkpoints released keeps only its record and scores
    if not (files.is_file(f"{checkpoint}/doctune.json") and files.is_file(f"{checkpoint}/config.json")):
        raise ExportError(
            f"trial {row.trial!r}: its checkpoint {files.path(checkpoint)} no longer exists; export another trial "
            "with --trial, or restore the run's trials/"
        )
    return checkpoint


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    show_on_console(args.verbosity)
    with tempfile.TemporaryDirectory(prefix="doctune-export-") as fetched, contextlib.ExitStack() as fetching:
        try:
            try:
                run_dir, files = Path(args.run_dir), None
                if "://" in args.run_dir:  # the --to check first: nothing is fetched for an export refused anyway
                    check_target(args.to)
                    run_dir, files = Path(fetched), _fetch_records(args.run_dir, Path(fetched))
                row, search, checkpoint, target = check_inputs(run_dir, args.trial, args.to, files)
                files = files or run_files_of(run_dir)
                # fetched from the run's storage where it is there, for the block
                local = fetching.enter_context(files.as_local_dir(checkpoint))
            except OSError as err:
                where = files.uri if files else args.run_dir
                raise ExportError(
                    f"reading {where} failed ({str(err).splitlines()[0]}); run the command again"
                ) from None
            exported = export_trial(row, search, target, local)  # refuses a foreign DIR.partial first
        except ExportError as err:  # said of the URI, not of the temporary directory it was fetched into
            print(f"doctune: error: {str(err).replace(fetched, args.run_dir)}", file=sys.stderr)
            return EXIT_BAD_INPUT
    print(f"doctune: trial {row.trial} (objective {row.objective:.4f}) exported to {exported.path}")
    if exported.sentence_transformers_gap:
        print(f"doctune: no sentence-transformers files: {exported.sentence_transformers_gap}")
    return EXIT_OK
