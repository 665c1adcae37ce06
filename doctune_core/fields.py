"""Field metadata for the typed plans: the help line that the spec's documentation and error
messages show, and the range ``platform.spec`` checks a value against; and the leaves of a nested
mapping (a spec's keys as dotted names)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def constraint(
    help_: str,
    low: float | None = None,
    high: float | None = None,
    *,
    low_open: bool = False,
    high_open: bool = False,
    check: Callable[[Any], None] | None = None,
    perturbable: bool = False,
) -> dict:
    """Field metadata: a help line (for docs and errors), the valid range of the value, ``check``, a
    function that raises ``ValueError`` saying what is wrong with a value its type and range admit (a
    spec check turns it into a message naming the key), and ``perturbable``: whether a trial may
    change the value when it goes on from another trial's checkpoint (PBT; how the loss terms are
    weighed and the step size, never what decides the model's parts or its pairs)."""
    metadata = {"help": help_, "low": low, "high": high, "low_open": low_open, "high_open": high_open}
    return metadata | ({"check": check} if check else {}) | ({"perturbable": True} if perturbable else {})


def leaves(tree: dict, prefix: str = "") -> dict[str, object]:
    """``{"a.b.c": value}`` for every value of a nested mapping that is not itself a mapping."""
    found: dict[str, object] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            found |= leaves(value, f"{name}.")
        else:
            found[name] = value
    return found
