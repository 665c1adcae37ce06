"""Field metadata for the typed plans: the help line that the spec's documentation and error
messages show, and the range ``platform.spec`` checks a value against."""

from __future__ import annotations


def constraint(
    help_: str, low: float | None = None, high: float | None = None, *, low_open: bool = False, high_open: bool = False
) -> dict:
    """Field metadata: a help line (for docs and errors) and the valid range of the value."""
    return {"help": help_, "low": low, "high": high, "low_open": low_open, "high_open": high_open}
