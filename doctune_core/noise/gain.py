"""A gain of one row over another and its interval, as a verdict records and prints it."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

from doctune_core.noise.rules import FEW_DISAGREED, LEVEL


@dataclass(frozen=True)
class SeedSpread:
    """The training seeds' standard deviation of a score, estimated from ``runs`` training runs of
    one configuration (``search.confirm_seeds``): ``runs - 1`` degrees of freedom."""

    sd: float
    runs: int


@dataclass(frozen=True)
class Gain:
    """``difference`` = score(a) - score(b), with its interval (``paired_gain``); ``low`` and ``high``
    are None, and ``undecided`` says why, where the parts are too small to decide."""

    difference: float
    low: float | None
    high: float | None
    # at the observed difference; a binary part's interval takes each candidate gain's (score_interval)
    standard_error: float | None = None
    degrees_of_freedom: float | None = None
    level: float = LEVEL
    # whether the interval holds the training seeds' noise (measured by search.confirm_seeds); a
    # trained row's score is one training run's, so without it the interval is too narrow
    seed_noise: bool = False
    undecided: str | None = None
    # how many training runs' gains ``difference`` is the mean of (``seed_mean_gain``)
    runs: int = 1
    # where the items leave an interval no width (none disagreed, or every one moved alike): what they
    # did, said instead of an interval of no width (``agreement``); ``low`` and ``high`` are then None
    agreement: str | None = None
    # how many of the ``items`` the two rows scored apart (``disagreeing_items``; the binary parts' alone
    # where the gain has some, as their score interval gives it its width; a seeds' mean: the most in any
    # run); a verdict on at most ``FEW_DISAGREED`` of them says so (docs/decisions/gain-intervals.md)
    disagreed: int | None = None
    items: int | None = None
    # the variance components its interval was made of, for a seeds' mean to combine (``seed_mean_gain``):
    # ``fixed``, [variance, degrees of freedom] each; ``binary``, each binary part's [share, up, down, n, gain]
    components: dict | None = None

    @property
    def beyond_noise(self) -> bool:
        return self.low is not None and self.high is not None and (self.low > 0 or self.high < 0)

    def describe(self) -> str:
        seeds = "" if self.seed_noise else "; seed noise not included"
        seeds += f"; the mean of {self.runs} training runs" if self.runs > 1 else ""
        if self.agreement is not None:
            return f"{self.difference:+.4f} ({self.agreement}: no interval{seeds})"
        if self.low is None or self.high is None:
            return f"{self.difference:+.4f} (too few items to decide: {self.undecided}{seeds})"
        verdict = "beyond noise" if self.beyond_noise else "within noise"
        if self.disagreed is not None and self.disagreed <= FEW_DISAGREED:
            verdict += f", {self.disagreed} of {self.items} items disagreed"
        return (
            f"{self.difference:+.4f} ({self.level:.0%} interval {self.low:+.4f} to {self.high:+.4f}: {verdict}{seeds})"
        )

    def cell(self) -> str:
        """The gain and its interval in a table cell (``s``: seed noise included)."""
        seeds = " s" if self.seed_noise else ""
        if self.agreement is not None:
            return f"{self.difference:+.3f} ({self.agreement}{seeds})"
        if self.low is None or self.high is None:
            return f"{self.difference:+.3f} (too few items to decide{seeds})"
        return f"{self.difference:+.3f} ({self.low:+.3f} to {self.high:+.3f}{seeds})"

    def record(self) -> dict:
        return asdict(self) | {"beyond_noise": self.beyond_noise}

    @classmethod
    def from_record(cls, record: dict) -> Gain:
        return cls(**{f.name: record[f.name] for f in fields(cls) if f.name in record})


@dataclass(frozen=True)
class TaskGain(Gain):
    """A gain on one task (``task_gain``) with the same gain within each stratum of its items (a
    retrieval task's length buckets: ``by_stratum``, each with its ``n`` items)."""

    by_stratum: dict[str, TaskGain] = field(default_factory=dict)
    n: int | None = None  # a stratum's items (None on the task's whole part)

    def record(self) -> dict:
        """The whole part's record with its strata's (``by_stratum``); a stratum's with its ``n``."""
        gain = {f.name: getattr(self, f.name) for f in fields(Gain)} | {"beyond_noise": self.beyond_noise}
        if self.n is not None:
            return gain | {"n": self.n}
        return gain | {"by_stratum": {label: stratum.record() for label, stratum in self.by_stratum.items()}}

    @classmethod
    def from_record(cls, record: dict) -> TaskGain:
        gain = Gain.from_record(record)
        strata = {label: cls.from_record(stratum) for label, stratum in record.get("by_stratum", {}).items()}
        return cls(**{f.name: getattr(gain, f.name) for f in fields(Gain)}, by_stratum=strata, n=record.get("n"))
