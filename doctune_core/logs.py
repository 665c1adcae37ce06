"""doctune's output goes through Python's logging, under the logger ``doctune``.

Every module logs to ``logging.getLogger(f"doctune.{__name__}")``. Called from Python, doctune adds no
handler: with logging at its default level (WARNING) a search prints nothing of its progress, and
the caller chooses what it sees (``logging.basicConfig(level=logging.INFO)`` shows what the command
line shows). The command line calls ``show_on_console``: progress and results on standard output,
warnings and errors on standard error, each message as written (they carry their ``doctune:``
prefix). Ray's forwarding of its workers' output follows the same level (``tells_progress``): none
when ``doctune`` does not log at INFO. The libraries' own output (Tune's status table, Ray Train's
per-round lines, Ray's and Optuna's notes, Python's warnings) is shown with ``-v`` alone
(``shows_library_output``); errors, a failed trial's included, always are. Each of a search's Ray
worker processes logs at the driver's level (``configure_worker_logging``). A phase that can run
for minutes shows a progress bar (``progress``: tqdm's) where a person watches a terminal.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import warnings
from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")

LOGGER = "doctune"
# the driver's level for doctune's logger, carried to each Ray worker process of its search
LOG_LEVEL_ENV = "DOCTUNE_LOG_LEVEL"


class _Console(logging.Handler):
    """INFO and below to standard output, WARNING and above to standard error; the streams are looked
    up at each message, so a test's or a notebook's replacement of them is followed."""

    def emit(self, record: logging.LogRecord) -> None:
        stream = sys.stderr if record.levelno >= logging.WARNING else sys.stdout
        try:
            stream.write(self.format(record) + "\n")
            stream.flush()
        except Exception:
            self.handleError(record)


def show_on_console(verbosity: int = 0) -> None:
    """The command line's output: INFO and above (``verbosity`` -1, ``-q``: WARNING and above; 1,
    ``-v``: DEBUG too). Calling it again replaces the console handler it added before."""
    level = logging.WARNING if verbosity < 0 else logging.DEBUG if verbosity > 0 else logging.INFO
    _log_to_console(level)
    if verbosity < 1:  # the libraries' warnings (deprecations, their own advice) with -v only
        warnings.filterwarnings("ignore")


def _log_to_console(level: int | str) -> None:
    """doctune's logger at ``level`` on the console (``_Console``), replacing the console it had."""
    logger = logging.getLogger(LOGGER)
    for handler in [h for h in logger.handlers if isinstance(h, _Console)]:
        logger.removeHandler(handler)
    console = _Console()
    console.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(console)
    logger.setLevel(level)
    logger.propagate = False  # the console shows each message once, whatever the root logger does


def tells_progress() -> bool:
    """Whether doctune's progress is shown anywhere (its logger enabled for INFO): Ray's workers'
    output and Tune's progress are forwarded only then."""
    return logging.getLogger(LOGGER).isEnabledFor(logging.INFO)


def shows_library_output() -> bool:
    """Whether the libraries' own output is shown (``-v``: doctune's logger enabled for DEBUG): Tune's
    status table, Ray Train's per-round lines, Ray's and Optuna's notes, Python's warnings."""
    return logging.getLogger(LOGGER).isEnabledFor(logging.DEBUG)


def library_log_level() -> str:
    """The level the libraries log at on the console: INFO with ``-v``, else WARNING."""
    return "INFO" if shows_library_output() else "WARNING"


def worker_environment() -> dict[str, str]:
    """What a search's Ray workers need to log as its driver does (``configure_worker_logging``)."""
    return {LOG_LEVEL_ENV: logging.getLevelName(logging.getLogger(LOGGER).getEffectiveLevel())}


# Ray Train logs each round's report in the worker ("Reporting training result N: TrainingReport(...)",
# every metric, thousands of characters) through a logger named after its module's file rather than
# under ``ray.train``, so Train's own log level does not reach it
_TRAIN_REPORT_MODULE = ("train", "v2", "_internal", "execution", "context.py")


def configure_worker_logging() -> None:
    """In a Ray worker process of a search (its ``worker_process_setup_hook``): doctune's messages on
    the console at the driver's level (``worker_environment``), which Ray forwards to the driver where
    it shows doctune's progress; without ``-v`` there, Ray Train's per-round report lines and
    Python's warnings are left out. Nothing in a process no doctune search started."""
    level = os.environ.get(LOG_LEVEL_ENV)
    if level is None:
        return
    _log_to_console(level)
    if not shows_library_output():
        import ray

        warnings.filterwarnings("ignore")
        report_logger = os.path.join(os.path.dirname(ray.__file__), *_TRAIN_REPORT_MODULE)
        logging.getLogger(report_logger).setLevel(logging.WARNING)


def add_verbosity_options(parser: argparse.ArgumentParser) -> None:
    """``-q``/``--quiet`` (warnings and errors only) and ``-v``/``--verbose`` (debug messages and the
    libraries' own output too: Tune's status table, Ray's and Ray Train's lines, warnings), as
    ``args.verbosity`` (-1, 0 or 1) for ``show_on_console``."""
    chosen = parser.add_mutually_exclusive_group()
    chosen.add_argument(
        "-q",
        "--quiet",
        dest="verbosity",
        action="store_const",
        const=-1,
        default=0,
        help="print warnings and errors only",
    )
    chosen.add_argument(
        "-v",
        "--verbose",
        dest="verbosity",
        action="store_const",
        const=1,
        help="print debug messages and the libraries' own output too (Tune's status table, Ray's lines, warnings)",
    )


def progress(items: Iterable[T], total: int, what: str, unit: str = "row") -> Iterator[T]:
    """``items``, with a progress bar on standard error (a count, the time spent and the time left)
    where a person watches: doctune's progress is shown (``tells_progress``) and standard error is a
    terminal; nothing otherwise (a log file, a CI job, a notebook at WARNING)."""
    from tqdm import tqdm

    shown = tells_progress() and sys.stderr.isatty()
    yield from tqdm(items, total=total, desc=f"doctune: {what}", unit=unit, disable=not shown, leave=False)
