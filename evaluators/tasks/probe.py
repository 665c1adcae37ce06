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

from doctune_core.outcomes import Outcomes
from evaluators.tasks.base import (
    Embedder,
    PerEncoder,
    Split,
    Task,
    held_out_indices,
    validation_size,
)
from evaluators.tasks.probe_metrics import (
    INFLUENCES,
    accuracy,
    draw_values,
    exact_match,
    macro_f1,
    macro_f1_multilabel,
    mean_over_draws,
    mean_over_draws_influence,
    micro_f1,
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


def stratum(label: Label) -> str:
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
    return {candidates[i] for i in held_out_indices([stratum(train_y[i]) for i in candidates], size)}


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
        locked_strata = [stratum(test_y[i]) for i in locked]
        cut = self.budget.max_test
        kept = [locked[i] for i in stratified_subsample(locked_strata, cut)] if cut else locked
        strata = [stratum(y) for y in train_y]
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
        strata = [stratum(y) for y in test_y]
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
