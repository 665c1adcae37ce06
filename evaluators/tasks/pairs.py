"""Pair classification: do two documents link? (the form of the AAN citation task in the
DocSplit/SimDE evaluations).

Each pair's two embeddings ``u, v`` become the features ``[u * v, |u - v|]``; a classifier
(``EvalBudget.probe_head``) fitted on the training pairs labels the test pairs; accuracy is the
main score. ``cosine_accuracy`` is the accuracy of the best cosine threshold on the training
pairs applied to the test pairs (no fitted weights at all).

Built in: ``20ng-topic-pairs``, pairs of 20 Newsgroups posts labelled "linked" when they come from
the same group (half the pairs). Any collection of real links, such as citations, is a task
named ``pairs:<directory>``: ``corpus.jsonl`` (``_id``, ``title``, ``text``, as in BEIR) and
``pairs/train.tsv``, ``pairs/test.tsv`` (optionally ``pairs/dev.tsv``, the validation part) with
rows ``id-a<TAB>id-b<TAB>label`` (1 linked, 0 not).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

from doctune_core.outcomes import Outcomes, mean_of_rows
from evaluators.tasks.base import (
    SPLIT_SEED,
    TASK_FAMILIES,
    Embedder,
    PerEncoder,
    Split,
    Task,
    TaskMetadata,
    held_out_indices,
    register_task,
)
from evaluators.tasks.orange import ORANGE_SOURCE, read_orange_splits
from evaluators.tasks.probe import fit_head
from evaluators.tasks.twenty_newsgroups import TWENTY_NEWSGROUPS

Pair = tuple[str, str, int]  # text a, text b, 1 if linked
DEFAULT_PAIRS = 1000


def same_label_pairs(texts: list[str], labels: list[str], count: int, seed: int) -> list[Pair]:
    """``count`` pairs of distinct texts, alternately of the same label (1) and of different labels (0)."""
    rng = np.random.default_rng(seed)
    by_label: dict[str, list[int]] = {}
    for i, label in enumerate(labels):
        by_label.setdefault(label, []).append(i)
    pairs: list[Pair] = []
    if len(by_label) < 2:
        raise ValueError("pairs need at least two labels")
    while len(pairs) < count:
        a = int(rng.integers(len(texts)))
        linked = len(pairs) % 2 == 0
        if linked:
            b = int(rng.choice(by_label[labels[a]]))
        else:
            b = int(rng.integers(len(texts)))
            while labels[b] == labels[a]:  # a different label (redrawn: few tries with many labels)
                b = int(rng.integers(len(texts)))
        if b != a:
            pairs.append((texts[a], texts[b], int(linked)))
    return pairs


class PairClassification(Task):
    """Subclasses provide ``read() -> (train_pairs, val_pairs, test_pairs)``; the classifier and
    the cosine threshold are fitted on the training pairs only and score both other parts."""

    def read(self) -> tuple[list[Pair], list[Pair], list[Pair]]:
        raise NotImplementedError

    def load(self) -> None:
        train, val, test = self.read()
        cap = lambda pairs, n: pairs[:n] if n else pairs  # noqa: E731
        self.train_pairs = cap(train, self.budget.max_train)
        test_pairs = {(a, b) for a, b, _ in test}
        val = [p for p in val if (p[0], p[1]) not in test_pairs]  # a pair in both files is a test pair
        self.parts = {"val": cap(val, self.budget.max_test), "test": cap(test, self.budget.max_test)}
        self.sizes = {
            "val": {"pairs": (len(self.parts["val"]), len(val))},
            "test": {"pairs": (len(self.parts["test"]), len(test))},
        }
        self.check_parts({split: len(pairs) for split, pairs in self.parts.items()})
        self._fitted = PerEncoder()  # (vectors, classifier, cosine threshold), shared by both parts

    def _fit(self, embed: Embedder) -> tuple[dict[str, np.ndarray], object, float]:
        every = (*self.train_pairs, *self.parts["val"], *self.parts["test"])
        texts = list(dict.fromkeys(t for a, b, _ in every for t in (a, b)))
        vectors = dict(zip(texts, embed(texts)))
        train_x, train_y, train_cos = pair_features(self.train_pairs, vectors)
        classifier = fit_head(self.budget.probe_head, train_x, train_y, seed=0)
        return vectors, classifier, best_threshold(train_cos, train_y)

    def outcomes(self, embed: Embedder, split: Split) -> Outcomes:
        vectors, classifier, threshold = self._fitted.get(embed, lambda: self._fit(embed))
        pairs = self.parts[split]
        features, labels, cosine = pair_features(pairs, vectors)
        correct = (classifier.predict(features) == labels).astype(np.float64)
        accuracy = float(np.mean(correct))
        scores = {
            "main": accuracy,
            "accuracy": accuracy,
            "cosine_accuracy": float(np.mean((cosine >= threshold) == labels)),
            "cosine_threshold": threshold,
            "pairs": float(len(pairs)),
        }
        return Outcomes(scores, correct, mean_of_rows, binary=True)


def pair_features(pairs: list[Pair], vectors: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``[u * v, |u - v|]`` per pair, the labels, and the pairs' cosines (vectors are L2-normalised)."""
    u = np.stack([vectors[a] for a, _, _ in pairs])
    v = np.stack([vectors[b] for _, b, _ in pairs])
    return np.hstack([u * v, np.abs(u - v)]), np.array([y for _, _, y in pairs]), np.sum(u * v, axis=1)


def best_threshold(scores: np.ndarray, labels: np.ndarray) -> float:
    """The cosine threshold (``linked`` when score >= threshold) with the highest training accuracy."""
    candidates = np.unique(scores)
    accuracies = [np.mean((scores >= t) == labels) for t in candidates]
    return float(candidates[int(np.argmax(accuracies))])


@register_task
class NewsgroupsTopicPairs(PairClassification):
    metadata = TaskMetadata(
        name="20ng-topic-pairs",
        type="pairs",
        description="pairs of 20 Newsgroups posts, linked when from the same group; classifier on [u*v, |u-v|]",
        source=ORANGE_SOURCE,
        split=f"pairs drawn within parts of the {TWENTY_NEWSGROUPS.published} splits (seeded): training "
        "pairs from four fifths of train, validation pairs from its other fifth (stratified), test pairs from test",
        main_score="accuracy",
        long_inputs="chunk",
    )

    def read(self):
        train_x, train_y, test_x, test_y = read_orange_splits("20newsgroups")
        held_out = set(held_out_indices(train_y, len(train_y) // 5))
        fit = [i for i in range(len(train_y)) if i not in held_out]
        val = sorted(held_out)
        scored = self.budget.max_test or DEFAULT_PAIRS
        return (
            same_label_pairs(
                [train_x[i] for i in fit], [train_y[i] for i in fit], self.budget.max_train or DEFAULT_PAIRS, 0
            ),
            same_label_pairs([train_x[i] for i in val], [train_y[i] for i in val], scored, seed=2),
            same_label_pairs(test_x, test_y, scored, seed=1),
        )


PAIR_FILES = ("corpus.jsonl", "pairs/train.tsv", "pairs/test.tsv")


@TASK_FAMILIES.register("pairs:")
class LinkedPairsDirectory(PairClassification):
    """Linked document pairs (citations, hyperlinks): corpus.jsonl, pairs/train.tsv, pairs/test.tsv."""

    required_files = PAIR_FILES

    def __init__(self, budget, directory: str) -> None:
        super().__init__(budget)
        self.directory = Path(directory).expanduser()
        self.metadata = TaskMetadata(
            name=f"pairs:{directory}",
            type="pairs",
            description=f"linked document pairs at {directory}",
            source=str(self.directory),
            split="pairs/train.tsv; validation: pairs/dev.tsv where present, else a seeded fifth of the "
            "training pairs; test: pairs/test.tsv",
            main_score="accuracy",
            long_inputs="chunk",
        )

    def read(self):
        with (self.directory / "corpus.jsonl").open(encoding="utf-8") as handle:
            records = [json.loads(line) for line in handle if line.strip()]
        corpus = {str(r["_id"]): f"{r.get('title', '')} {r['text']}".strip() for r in records}

        def pairs(split: str) -> list[Pair]:
            with (self.directory / "pairs" / f"{split}.tsv").open(encoding="utf-8") as handle:
                rows = [row for row in csv.reader(handle, delimiter="\t") if row and row[2].strip().isdigit()]
            unknown = sorted({i for a, b, _ in rows for i in (a, b) if i not in corpus})
            if unknown:
                raise ValueError(f"{self.directory}/pairs/{split}.tsv names ids not in corpus.jsonl: {unknown[:5]}")
            return [(corpus[a], corpus[b], int(label)) for a, b, label in rows]

        train = pairs("train")
        if (self.directory / "pairs" / "dev.tsv").exists():
            return train, pairs("dev"), pairs("test")
        order = np.random.default_rng(SPLIT_SEED).permutation(len(train))
        val = set(order[: len(train) // 5].tolist())
        return [p for i, p in enumerate(train) if i not in val], [train[i] for i in sorted(val)], pairs("test")
