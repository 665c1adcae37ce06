"""Markdown tables as the benchmarks print them for bench/RESULTS.md and the files it links:
``tests/bench/test_results_tables.py`` rebuilds each from the JSON its command wrote, through the
benchmark's own formatter, and compares it cell by cell."""

from __future__ import annotations

from collections.abc import Collection, Sequence


def table(header: Sequence[str], rows: Sequence[Sequence[str]], numeric: Collection[int] = ()) -> list[str]:
    """A Markdown table's lines: ``header``, then ``rows``; the columns in ``numeric`` right-aligned."""
    rule = "|" + "|".join("---:" if i in numeric else "---" for i in range(len(header))) + "|"
    return ["| " + " | ".join(header) + " |", rule, *("| " + " | ".join(row) + " |" for row in rows)]
