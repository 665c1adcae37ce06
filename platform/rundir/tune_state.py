"""A run's saved Tune state, checked before a search or a study restores it."""

from __future__ import annotations

from doctune_core.run_files import RunFiles
from doctune_core.run_layout import TUNE_DIR
from platform.exit_codes import UsageError


def refuse_unreadable_state(files: RunFiles, advice: str) -> None:
    """Refuse (``UsageError``, ending with ``advice``) to resume a run whose saved Tune state this
    doctune cannot read back (a search asks before Ray starts, a study before it restores a row's
    run): Tune pickles the search's parts (the driver's callbacks, the scheduler, Optuna's space) by
    module path, so a run started by a doctune whose modules have since moved (CHANGELOG.md) would
    fail mid-restore. Each Tune run's ``tuner.pkl`` and its latest searcher state are loaded as
    ``Tuner.restore`` loads them."""
    from ray import cloudpickle

    for experiment in files.children(TUNE_DIR):
        if not files.is_file(f"{TUNE_DIR}/{experiment}/tuner.pkl"):
            continue  # no saved state: nothing is restored
        names = files.children(f"{TUNE_DIR}/{experiment}")
        searcher_states = [n for n in names if n.startswith("searcher-state-") and n.endswith(".pkl")]
        for name in ["tuner.pkl", *searcher_states[-1:]]:
            try:
                cloudpickle.loads(files.read(f"{TUNE_DIR}/{experiment}/{name}"))
            except (ImportError, AttributeError) as err:
                raise UsageError(
                    f"{files.uri}: this run was started by an earlier doctune, whose saved search state this one "
                    f"cannot read ({TUNE_DIR}/{experiment}/{name}: {err}; Tune saves the search's parts by "
                    f"module path, and some have moved since: CHANGELOG.md). {advice}"
                ) from None
