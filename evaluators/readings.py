"""The ledger of locked test parts read: how often a test verdict's parts were read before it.

A locked test part (docs/decisions/locked-test-parts.md) tells the truth about a choice only while
nothing has chosen by it; and a verdict read on it is independent of other verdicts only if it is
the first one read there. A user who runs the default search three times reads its locked parts
three times, and the third verdict is no longer independent of the first two. So every scoring of a
locked part that reports something appends an entry to this ledger: a search's end (its winner, the
baselines and the references), each run of ``search.confirm_seeds``, a study that shows test scores,
``python -m evaluators --part test``. An entry holds the parts read (task -> ``part_digest``), what
was read, doctune's version and commit, the run directory and the time; every test verdict doctune
prints says how many earlier entries read one of its parts (``ReadingCount.describe``).

The driver writes it (whichever process scored the part: an evaluator actor's scores come back to
the driver with their digests), beside doctune's cache: ``$DOCTUNE_CACHE/locked-part-readings.jsonl``,
or the file ``$DOCTUNE_READINGS`` names (tests keep theirs apart). One JSON object a line, each
count and append made under an exclusive lock, so searches sharing a cache count each other's
readings and none is lost.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

READINGS_ENV = "DOCTUNE_READINGS"
LEDGER_NAME = "locked-part-readings.jsonl"


def ledger_path() -> Path:
    """The ledger this process writes and counts: ``$DOCTUNE_READINGS``, else beside the cache."""
    from doctune_core.data import cache_dir

    named = os.environ.get(READINGS_ENV)
    return Path(named) if named else cache_dir() / LEDGER_NAME


@dataclass(frozen=True)
class LedgerEntry:
    """One entry: the locked ``parts`` read (task -> part digest), ``what`` was read and by which
    command, doctune's ``version`` and ``commit``, the ``run_dir`` (None for a command with none),
    and the ``time`` (UTC, ISO 8601)."""

    parts: dict[str, int]
    what: str
    run_dir: str | None
    version: str | None
    commit: str | None
    time: str

    def shares_a_part(self, parts: Mapping[str, int]) -> bool:
        return any(self.parts.get(task) == digest for task, digest in parts.items())


@dataclass(frozen=True)
class ReadingCount:
    """What a test verdict carries: how many earlier entries of the ``ledger`` read one of its
    ``parts`` (``before``; 0: this is the parts' first reading on that ledger)."""

    before: int
    parts: dict[str, int] = field(default_factory=dict)
    ledger: str = ""

    def describe(self) -> str:
        """The sentence every test verdict carries."""
        if self.before == 0:
            return "the locked part's first reading on this cache"
        times = "once" if self.before == 1 else f"{self.before} times"
        return f"locked part read {times} before on this cache: this verdict is not independent of the earlier ones"

    def record(self) -> dict:
        return asdict(self)

    @classmethod
    def from_record(cls, record: Mapping) -> ReadingCount:
        return cls(int(record["before"]), dict(record.get("parts", {})), str(record.get("ledger", "")))


def locked_parts(scores: Mapping[str, Mapping[str, Mapping]]) -> dict[str, int]:
    """The locked test parts a row's scores (task -> part -> metrics) hold, task -> part digest."""
    return {
        task: int(by_part["test"]["part_digest"])
        for task, by_part in scores.items()
        if "part_digest" in by_part.get("test", {})
    }


def read_ledger(path: Path | None = None) -> list[LedgerEntry]:
    """Every entry of the ledger, oldest first (none where it does not exist yet)."""
    path = path or ledger_path()
    if not path.exists():
        return []
    return [LedgerEntry(**json.loads(line)) for line in path.read_text().splitlines() if line.strip()]


def record_reading(parts: Mapping[str, int], what: str, run_dir: str | Path | None = None) -> ReadingCount:
    """Append a reading of ``parts`` to the ledger and return how many earlier entries read one of
    them. Counting and appending happen under one exclusive lock on the ledger file itself."""
    from doctune_core.provenance import doctune_version, git_commit

    path = ledger_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    entry = LedgerEntry(
        parts=dict(parts),
        what=what,
        run_dir=None if run_dir is None else str(run_dir),
        version=doctune_version(),
        commit=git_commit(),
        time=datetime.now(UTC).isoformat(timespec="seconds"),
    )
    with path.open("a+") as ledger:
        fcntl.flock(ledger, fcntl.LOCK_EX)
        try:
            ledger.seek(0)
            earlier = [LedgerEntry(**json.loads(line)) for line in ledger.read().splitlines() if line.strip()]
            ledger.write(json.dumps(asdict(entry)) + "\n")
            ledger.flush()
            os.fsync(ledger.fileno())
        finally:
            fcntl.flock(ledger, fcntl.LOCK_UN)
    return ReadingCount(sum(e.shares_a_part(parts) for e in earlier), dict(parts), str(path))
