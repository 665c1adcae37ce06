"""doctune from Python, in the calling process: run a search, score an encoder, read a spec.

The search driver is the package ``platform``, which shares its name with the standard library's
module. A notebook has usually imported the standard one already (torch and ray do), so the driver
is put in its place only while a call runs: for the call, ``sys.modules["platform"]`` is the
driver, which carries every name of the standard module too (``platform/__init__.py``), and the
module that was there before is put back afterwards. Objects the driver returns (a leaderboard's
rows, a spec) stay usable after the call.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from doctune.cli import driver_root

_driver_package = None  # the driver, once imported: every call puts the same package in place


@contextmanager
def _driver() -> Iterator[None]:
    """The driver package as ``sys.modules["platform"]`` for the block; what was there before after it."""
    global _driver_package
    before = sys.modules.get("platform")
    if before is not None and hasattr(before, "__path__"):  # the driver already (run from a checkout)
        yield
        return
    if _driver_package is None:
        sys.modules.pop("platform", None)
        sys.path.insert(0, str(driver_root()))
        try:
            _driver_package = importlib.import_module("platform")
        finally:
            sys.path.pop(0)
    sys.modules["platform"] = _driver_package
    try:
        yield
    finally:
        if before is not None:
            sys.modules["platform"] = before
        else:  # nothing had imported it: the standard module from now on
            sys.modules.pop("platform")
            importlib.import_module("platform")


def search(
    spec: str | Path,
    profile: str | None = None,
    run_dir: str | Path | None = None,
    storage: str | None = None,
    resume: bool = False,
    on_trial: Callable[[str, dict], None] | None = None,
) -> list:
    """Run the search ``spec`` (a path, or a shipped spec's name such as ``docsplit_long``) as
    ``doctune search`` does, in this process; returns the leaderboard's rows, ranked (each a
    ``platform.leaderboard.Row``: ``trial``, ``objective``, ``test_objective``, ``scores``,
    ``checkpoint``, ``hyperparameters``). ``on_trial(trial_id, result)`` is called with every round
    a trial reports (validation scores only). Raises ``BadInput`` with the message the command line
    prints (its exit code 2), ``SearchFailed`` where no trial produced a score, ``KeyboardInterrupt``
    when interrupted (the same call with ``resume=True`` continues it)."""
    with _driver():
        from platform.search import bad_input, run

        try:
            outcome = run(spec, profile, Path(run_dir) if run_dir else None, storage, resume, on_trial=on_trial)
        except bad_input() as err:
            raise BadInput(str(err)) from err
    if outcome.code != 0:
        raise SearchFailed(f"the search in {outcome.run_dir} failed; its leaderboard says why for each trial")
    return outcome.rows


def load_spec(spec: str | Path, profile: str = "local"):
    """The search spec ``spec`` (a path, or a shipped spec's name), validated for ``profile``: a
    ``platform.spec.SearchSpec``. Raises ``BadInput`` naming what is wrong."""
    with _driver():
        from platform.spec import SpecError
        from platform.spec import load_spec as load

        try:
            return load(str(spec), profile)[0]
        except SpecError as err:
            raise BadInput(str(err)) from err


def evaluate(model: str, tasks: list[str], **settings):
    """``model`` (a directory, a packaged alias such as ``all-minilm-l6-v2``, or a Hugging Face id)
    scored on ``tasks``: an ``evaluators.evaluate.Evaluation`` (``scores``: task -> part -> metric).
    ``settings``: ``evaluators.evaluate.evaluate``'s (pooling, max_length, budget, ...). Raises
    ``BadInput`` for an unknown task or a model that is not found."""
    from evaluators.evaluate import evaluate as score
    from evaluators.tasks import UnknownTask

    try:
        return score(model, tasks, **settings)
    except UnknownTask as err:
        raise BadInput(err.args[0]) from err


class BadInput(ValueError):
    """Bad input to a call (spec, model, corpus, run directory, storage, resources, task): the
    message names what is wrong and how to fix it; nothing was started."""


class SearchFailed(RuntimeError):
    """A search that ran but produced no scored trial (or could not keep its records)."""
