"""doctune's output through logging (``doctune_core.logs``): the command line's console, and silence from Python."""

from __future__ import annotations

import logging
import sys

import pytest

from doctune_core.logs import LOGGER, progress, show_on_console, tells_progress


@pytest.fixture
def doctune_logger():
    """The ``doctune`` logger (``console_output`` in conftest puts it back after each test)."""
    return logging.getLogger(LOGGER)


def test_from_python_at_the_default_level_progress_is_not_shown_and_warnings_are(doctune_logger, capsys, caplog):
    doctune_logger.handlers.clear()
    doctune_logger.setLevel(logging.NOTSET)  # the caller's level: the root's, WARNING by default
    doctune_logger.propagate = True  # as doctune leaves it when no command line configured it
    caplog.set_level(logging.WARNING)  # pytest's handler on the root stands in for the caller's
    assert not tells_progress()
    logging.getLogger(f"{LOGGER}.platform.search").info("doctune: search 'smoke'")
    logging.getLogger(f"{LOGGER}.platform.search").warning("doctune: warning: small parts")
    assert [record.getMessage() for record in caplog.records] == ["doctune: warning: small parts"]
    assert capsys.readouterr() == ("", "")  # doctune itself printed nothing
    logging.getLogger().setLevel(logging.INFO)  # the caller asks for progress
    assert tells_progress()


@pytest.mark.parametrize(("verbosity", "shown"), [(-1, ["warning", "error"]), (0, ["info", "warning", "error"])])
def test_the_console_sends_progress_to_stdout_and_warnings_to_stderr(doctune_logger, capsys, verbosity, shown):
    show_on_console(1)
    show_on_console(verbosity)  # again: one console, at the level asked last
    assert sum(h.__class__.__name__ == "_Console" for h in doctune_logger.handlers) == 1
    assert tells_progress() == (verbosity >= 0)
    module = logging.getLogger(f"{LOGGER}.platform.search_path.tuner")
    module.debug("doctune: debug")
    for level in ("info", "warning", "error"):
        getattr(module, level)(f"doctune: {level}")
    out, err = capsys.readouterr()
    assert out == ("doctune: info\n" if "info" in shown else "")
    assert err == "doctune: warning\ndoctune: error\n"  # each once: the console does not propagate to the root


def test_a_progress_bar_is_drawn_only_for_a_person_at_a_terminal(doctune_logger, capsys, monkeypatch):
    show_on_console(0)
    assert list(progress(iter(range(3)), 3, "baseline rows")) == [0, 1, 2]
    assert capsys.readouterr() == ("", "")  # standard error is not a terminal here: no bar
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert list(progress(iter(range(3)), 3, "baseline rows")) == [0, 1, 2]
    bar = capsys.readouterr().err
    assert "doctune: baseline rows:" in bar and "0/3 [00:00<?" in bar  # the count, the time spent and left
    show_on_console(-1)  # -q: no bar even at a terminal
    assert list(progress(iter(range(3)), 3, "baseline rows")) == [0, 1, 2]
    assert capsys.readouterr() == ("", "")
