"""doctune's output goes through Python's logging, under the logger ``doctune``.

Every module logs to ``logging.getLogger(f"doctune.{__name__}")``. Called from Python, doctune adds no
handler: with logging at its default level (WARNING) a search prints nothing of its progress, and
the caller chooses what it sees (``logging.basicConfig(level=logging.INFO)`` shows what the command
line shows). The command line calls ``show_on_console``: progress and results on standard output,
warnings and errors on standard error, each message as written (they carry their ``doctune:``
prefix). Ray's forwarding of its workers' output and Tune's progress follow the same level
(``tells_progress``): quiet when ``doctune`` does not log at INFO. A phase that can run for minutes
shows a progress bar (``progress``: tqdm's) where a person watches a terminal.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")

LOGGER = "doctune"


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


def add_verbosity_options(parser: argparse.ArgumentParser) -> None:
    """``-q``/``--quiet`` (warnings and errors only) and ``-v``/``--verbose`` (debug messages too), as
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
        "-v", "--verbose", dest="verbosity", action="store_const", const=1, help="print debug messages too"
    )


def progress(items: Iterable[T], total: int, what: str, unit: str = "row") -> Iterator[T]:
    """``items``, with a progress bar on standard error (a count, the time spent and the time left)
    where a person watches: doctune's progress is shown (``tells_progress``) and standard error is a
    terminal; nothing otherwise (a log file, a CI job, a notebook at WARNING)."""
    from tqdm import tqdm

    shown = tells_progress() and sys.stderr.isatty()
    yield from tqdm(items, total=total, desc=f"doctune: {what}", unit=unit, disable=not shown, leave=False)
