"""Pair classification: do two documents link? (the form of the AAN citation task in the
DocSplit/SimDE evaluations).

Each pair's two embeddings ``u, v`` become the features ``[u * v, |u - v|]``; a classifier
(``EvalBudget.probe_head``) fitted on the training pairs labels the test pairs; accuracy is the
main score. ``cosine_accuracy`` is the accuracy of the best cosine threshold on the training
pairs applied to the test pairs (no fitted weights at all).

Built in: ``20ng-topic-pairs``, pairs of 20 Newsgroups posts labelled "linked" when they come from
the same group (half the pairs). Any collection of real links, such as citations, is a task
named ``pairs:<directory>``: ``corpus.jsonl`` (``_id``, ``title``, ``text``, as in BEIR) and
``pairs/train.tsv``, ``pairs/test.tsv`` with rows ``id-a<TAB>id-b<TAB>label`` (1 linked, 0 not).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

from evaluators.tasks.base import Embedder, Task, TaskMetadata
from evaluators.tasks.probe import ORANGE_SOURCE, SPLITS, fit_head, read_orange_splits

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
    """Subclasses provide ``read() -> (train_pairs, test_pairs)``."""

    def read(self) -> tuple[list[Pair], list[Pair]]:
        raise NotImplementedError

    def load(self) -> None:
        self.train_pairs, self.test_pairs = self.read()
        if self.budget.max_train:
            self.train_pairs = self.train_pairs[: self.budget.max_train]
        if self.budget.max_test:
            self.test_pairs = self.test_pairs[: self.budget.max_test]

    def evaluate(self, embed: Embedder) -> dict[str, float]:
        texts = list(dict.fromkeys(t for a, b, _ in (*self.train_pairs, *self.test_pairs) for t in (a, b)))
        vectors = dict(zip(texts, embed(texts)))

        def features(pairs: list[Pair]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            u = np.stack([vectors[a] for a, _, _ in pairs])
            v = np.stack([vectors[b] for _, b, _ in pairs])
            cosine = np.sum(u * v, axis=1)  # embeddings are L2-normalised
            return np.hstack([u * v, np.abs(u - v)]), np.array([y for _, _, y in pairs]), cosine

        train_x, train_y, train_cos = features(self.train_pairs)
        test_x, test_y, test_cos = features(self.test_pairs)
        predicted = fit_head(self.budget.probe_head, train_x, train_y, seed=0).predict(test_x)
        accuracy = float(np.mean(predicted == test_y))
        threshold = best_threshold(train_cos, train_y)
        return {
            "main": accuracy,
            "accuracy": accuracy,
            "cosine_accuracy": float(np.mean((test_cos >= threshold) == test_y)),
            "cosine_threshold": threshold,
            "pairs": float(len(self.test_pairs)),
        }


def best_threshold(scores: np.ndarray, labels: np.ndarray) -> float:
    """The cosine threshold (``linked`` when score >= threshold) with the highest training accuracy."""
    candidates = np.unique(scores)
    accuracies = [np.mean((scores >= t) == labels) for t in candidates]
    return float(candidates[int(np.argmax(accuracies))])


class NewsgroupsTopicPairs(PairClassification):
    metadata = TaskMetadata(
        name="20ng-topic-pairs",
        type="pairs",
        description="pairs of 20 Newsgroups posts, linked when from the same group; classifier on [u*v, |u-v|]",
        source=ORANGE_SOURCE,
        split=f"pairs drawn within the {SPLITS['20newsgroups']} splits (seeded)",
        main_score="accuracy",
        long_inputs="chunk",
    )

    def read(self):
        train_x, train_y, test_x, test_y = read_orange_splits("20newsgroups")
        return (
            same_label_pairs(train_x, train_y, self.budget.max_train or DEFAULT_PAIRS, seed=0),
            same_label_pairs(test_x, test_y, self.budget.max_test or DEFAULT_PAIRS, seed=1),
        )


PAIR_FILES = ("corpus.jsonl", "pairs/train.tsv", "pairs/test.tsv")


class LinkedPairsDirectory(PairClassification):
    """Linked document pairs (citations, hyperlinks): corpus.jsonl, pairs/train.tsv, pairs/test.tsv."""

    def __init__(self, budget, directory: str) -> None:
        super().__init__(budget)
        self.directory = Path(directory).expanduser()
        self.metadata = TaskMetadata(
            name=f"pairs:{directory}",
            type="pairs",
            description=f"linked document pairs at {directory}",
            source=str(self.directory),
            split="pairs/train.tsv / pairs/test.tsv",
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

        return pairs("train"), pairs("test")
