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
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from doctune.cli import driver_root
from doctune.leaderboard import Leaderboard
from evaluators.evaluate import Evaluation
from evaluators.plan import EvalBudget

if TYPE_CHECKING:
    from platform.spec import SearchSpec

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
    *,
    profile: str | None = None,
    run_dir: str | Path | None = None,
    storage: str | None = None,
    resume: bool = False,
    validation_only: bool = False,
    on_trial: Callable[[str, dict[str, Any]], None] | None = None,
) -> Leaderboard:
    """Run a search in this process, as ``doctune search`` does.

    Args:
        spec: a spec file's path, or a shipped spec's name (``docsplit_long``).
        profile: ``smoke``, ``local`` or ``full``; None: the spec's own choice for this machine.
        run_dir: where the run's records go (default ``runs/<spec name>``).
        storage: a file system the run is kept in (``s3://bucket/prefix``), as ``--storage``.
        resume: continue the run in ``run_dir`` (or ``storage``) where it stopped.
        validation_only: read no locked test part (no test scores, no test verdict), as
            ``--validation-only``: for a run made to measure something.
        on_trial: called with a trial's id and every round it reports (validation scores only).

    Returns:
        The ``Leaderboard``: its rows ranked by the validation objective, ``.best`` the winner.

    Raises:
        BadInput: bad input (spec, model, corpus, run directory, storage, resources), with the
            message the command line prints (its exit code 2); nothing was started.
        SearchFailed: no trial produced a score, or the run's records could not be kept.
        KeyboardInterrupt: when interrupted; the same call with ``resume=True`` continues it.

    Example::

        board = doctune.search("docsplit_long", profile="smoke")
        print(board.best.trial, board.best.objective)
    """
    with _driver():
        from platform.search import bad_input, run

        try:
            outcome = run(
                spec,
                profile,
                Path(run_dir) if run_dir else None,
                storage,
                resume,
                on_trial=on_trial,
                validation_only=validation_only,
            )
        except bad_input() as err:
            raise BadInput(str(err)) from err
    if outcome.code != 0:
        raise SearchFailed(f"the search in {outcome.run_dir} failed; its leaderboard says why for each trial")
    return Leaderboard.read(outcome.run_dir)


def load_spec(spec: str | Path, *, profile: Literal["full", "local", "smoke"] = "local") -> SearchSpec:
    """Read a search spec and validate it for a profile, as a search does before it starts anything.

    Args:
        spec: a spec file's path, or a shipped spec's name (``docsplit_long``).
        profile: ``full``, ``local`` or ``smoke``: doctune's built-in overrides for that profile, then
            the spec's own ``profiles:`` section, are applied before validation.

    Returns:
        The spec as typed objects (``platform.spec.SearchSpec``): ``.train``, ``.search``,
        ``.evaluation`` and the rest, every value checked.

    Raises:
        BadInput: the spec is missing or invalid; the message names the key, what is wrong and how
            to fix it (what the command line prints with its exit code 2).

    Example::

        spec = doctune.load_spec("docsplit_long", profile="local")
        print(spec.train.steps, spec.search.samples, spec.evaluation.report_tasks)
    """
    with _driver():
        from platform.spec import SpecError
        from platform.spec import load_spec as load

        try:
            return load(str(spec), profile)[0]
        except SpecError as err:
            raise BadInput(str(err)) from err


def evaluate(
    model: str | Path,
    tasks: Sequence[str],
    *,
    pooling: str | None = None,
    max_length: int = 512,
    batch_size: int = 32,
    threads: int = 2,
    budget: EvalBudget | None = None,
    long_inputs: Literal["truncate", "chunk"] | None = None,
    cache_dir: str | Path | None = None,
    parts: Sequence[Literal["val", "test"]] = ("val",),
) -> Evaluation:
    """Score an encoder on doctune's tasks, as ``python -m evaluators`` does.

    Args:
        model: a directory, a packaged alias (``all-minilm-l6-v2``) or a Hugging Face id.
        tasks: task names (``python -m evaluators --list``); ``needle-retrieval@grid`` scores a
            long-document task over its whole length grid.
        pooling: ``mean``, ``cls`` or ``max``; None: the model's own (its ``doctune.json``), else mean.
        max_length: tokens an input is cut or chunked to (long-document tasks: ``budget.long_length``).
        batch_size: texts embedded at once.
        threads: CPU threads torch uses.
        budget: how much of each task's data to use (``EvalBudget``; default: all of it).
        long_inputs: ``truncate`` or ``chunk`` texts over ``max_length``; None: as each task says.
        cache_dir: the embedding cache (default: a temporary one).
        parts: ``val`` (validation) and/or ``test``, the locked part: read it only once a choice is
            made on validation; it reports, it never chooses.

    Returns:
        An ``Evaluation``: ``scores`` (task -> part -> metric -> value) and what was scored.

    Raises:
        BadInput: an unknown task or part, or a model that is not found.

    Example::

        scores = doctune.evaluate("all-minilm-l6-v2", ["news-title-retrieval"], max_length=256).scores
        print(scores["news-title-retrieval"]["val"]["main"])
    """
    from evaluators.evaluate import evaluate as score
    from evaluators.tasks import UnknownTask

    try:
        return score(
            str(model),
            list(tasks),
            pooling=pooling,
            max_length=max_length,
            batch_size=batch_size,
            threads=threads,
            budget=budget,
            long_inputs=long_inputs,
            cache_dir=Path(cache_dir) if cache_dir is not None else None,
            parts=tuple(parts),
        )
    except UnknownTask as err:
        raise BadInput(err.args[0]) from err


class BadInput(ValueError):
    """Bad input to a call (spec, model, corpus, run directory, storage, resources, task): the
    message names what is wrong and how to fix it; nothing was started."""


class SearchFailed(RuntimeError):
    """A search that ran but produced no scored trial (or could not keep its records)."""
