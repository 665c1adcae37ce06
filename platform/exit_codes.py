"""How every command ends: 0 success, 2 bad input (one message naming what is wrong and how to fix
it; nothing started), 1 any other failure, so ``search``, ``study``, ``report`` and ``export``
behave alike."""

from __future__ import annotations

EXIT_OK, EXIT_FAILURE, EXIT_BAD_INPUT = 0, 1, 2


class UsageError(ValueError):
    """Bad command-line input (run directory, flags)."""
