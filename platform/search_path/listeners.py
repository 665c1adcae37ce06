"""A search's rounds handed to code in the calling process (``doctune.search(..., on_trial=...)``).

Tune calls ``TrialListeners`` on the driver with every round a trial reports; it passes the round on
to the functions ``listening`` registered for the call. The callback itself holds none of them:
Tune saves its callbacks with the experiment and a resumed search gets them back from there, while
the functions to call are the resuming call's own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from ray import tune

TrialListener = Callable[[str, dict], None]  # (trial id, the round's report: validation scores only)

_listening: list[TrialListener] = []


@contextmanager
def listening(listener: TrialListener | None) -> Iterator[None]:
    """``listener`` called with every round a trial reports while the block runs (None: nothing)."""
    if listener is None:
        yield
        return
    _listening.append(listener)
    try:
        yield
    finally:
        _listening.remove(listener)


class TrialListeners(tune.Callback):
    """Hands every round Tune receives to the functions ``listening`` registered."""

    def on_trial_result(self, iteration: int, trials: list, trial, result: dict, **info) -> None:
        for listener in list(_listening):
            listener(trial.trial_id, dict(result))
