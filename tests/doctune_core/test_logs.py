"""doctune's output through logging (``doctune_core.logs``): the command line's console, and silence from Python."""

from __future__ import annotations

import ast
import logging
import sys
from pathlib import Path

import pytest

from doctune_core.logs import (
    LOG_LEVEL_ENV,
    LOGGER,
    configure_worker_logging,
    progress,
    show_on_console,
    shows_library_output,
    tells_progress,
    worker_environment,
)
from tests.conftest import ROOT


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


@pytest.mark.parametrize("verbosity", [0, 1])
def test_a_search_worker_logs_as_its_driver_and_leaves_ray_trains_round_reports_out_without_v(
    doctune_logger, capsys, monkeypatch, verbosity
):
    from ray.train.v2._internal.execution import context as train_context

    show_on_console(verbosity)  # the driver
    assert shows_library_output() == (verbosity == 1)
    carried = worker_environment()
    assert carried == {LOG_LEVEL_ENV: "DEBUG" if verbosity else "INFO"}
    # a worker process of its search: its own logging, the driver's level carried in its environment
    doctune_logger.handlers.clear()
    doctune_logger.setLevel(logging.NOTSET)
    monkeypatch.setenv(LOG_LEVEL_ENV, carried[LOG_LEVEL_ENV])
    before = train_context.logger.level
    try:
        train_context.logger.setLevel(logging.NOTSET)
        configure_worker_logging()
        logging.getLogger(f"{LOGGER}.trainers.reporting").info("[1cd56a9d] step 2/4 loss 0.8234")
        assert capsys.readouterr().out == "[1cd56a9d] step 2/4 loss 0.8234\n"  # Ray forwards it to the driver
        # Ray Train's "Reporting training result N: TrainingReport(...)", every metric of the round, logged
        # in the worker at INFO (its root logger's level there): with -v only
        assert train_context.logger.level == (logging.NOTSET if verbosity else logging.WARNING)
    finally:
        train_context.logger.setLevel(before)


def test_a_process_no_search_started_keeps_its_logging(doctune_logger, monkeypatch):
    monkeypatch.delenv(LOG_LEVEL_ENV, raising=False)
    doctune_logger.handlers.clear()
    configure_worker_logging()
    assert not doctune_logger.handlers


LIBRARY_PACKAGES = ("trainers", "evaluators", "doctune_core", "platform")


def _command_line_module(path: Path, source: str) -> bool:
    return path.name in ("__main__.py", "cli.py") or 'if __name__ == "__main__":' in source


def test_library_code_logs_and_only_command_line_modules_print():
    printing = []
    for package in LIBRARY_PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            source = path.read_text(encoding="utf-8")
            if _command_line_module(path, source):
                continue
            for node in ast.walk(ast.parse(source)):
                if not isinstance(node, ast.Call):
                    continue
                called = ast.unparse(node.func)
                if called in ("print", "sys.stdout.write", "sys.stderr.write"):
                    printing.append(f"{path.relative_to(ROOT)}:{node.lineno} {called}")
    assert not printing, printing
