"""Pair classification: built-in topic pairs and a directory of real links."""

from __future__ import annotations

import json

import numpy as np
import pytest

from evaluators.plan import EvalBudget
from evaluators.tasks import UnknownTask, make_task
from evaluators.tasks.orange import read_orange_splits
from evaluators.tasks.pairs import best_threshold, same_label_pairs


def test_pairs_are_balanced_distinct_and_seeded():
    texts = [f"t{i}" for i in range(30)]
    labels = [str(i % 3) for i in range(30)]
    pairs = same_label_pairs(texts, labels, 40, seed=0)
    assert sum(y for _, _, y in pairs) == 20 and all(a != b for a, b, _ in pairs)
    assert all((labels[texts.index(a)] == labels[texts.index(b)]) == bool(y) for a, b, y in pairs)
    assert pairs == same_label_pairs(texts, labels, 40, seed=0) != same_label_pairs(texts, labels, 40, seed=1)


def test_best_threshold_separates_when_it_can():
    assert best_threshold(np.array([0.1, 0.2, 0.8, 0.9]), np.array([0, 0, 1, 1])) == 0.8


def test_topic_pairs_score_a_topic_aware_encoder_above_a_random_one():
    task = make_task("20ng-topic-pairs", EvalBudget(max_train=200, max_test=100))
    task.load()
    assert (len(task.train_pairs), len(task.parts["val"]), len(task.parts["test"])) == (200, 100, 100)
    texts = lambda pairs: {t for a, b, _ in pairs for t in (a, b)}  # noqa: E731
    assert not texts(task.train_pairs) & texts(task.parts["val"])  # validation posts are never fitted on
    train_x, train_y, test_x, test_y = read_orange_splits("20newsgroups")
    group = dict(zip([*train_x, *test_x], [*train_y, *test_y]))
    names = sorted(set(train_y))
    rng = np.random.default_rng(0)

    def topic_aware(texts):
        vectors = np.eye(len(names))[[names.index(group[t]) for t in texts]] + 0.1 * rng.normal(size=(len(texts), 20))
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

    aware = task.evaluate(topic_aware)
    for split in ("val", "test"):
        assert aware[split]["accuracy"] > 0.95 and aware[split]["cosine_accuracy"] > 0.95
    random = task.evaluate(lambda texts: rng.normal(size=(len(texts), 20)))
    assert random["test"]["accuracy"] < 0.7


def test_a_directory_of_links_is_a_task(tmp_path):
    train_x, train_y, _, _ = read_orange_splits("reuters-r8")
    (tmp_path / "pairs").mkdir()
    with (tmp_path / "corpus.jsonl").open("w") as handle:
        for i, text in enumerate(train_x[:60]):
            handle.write(json.dumps({"_id": f"d{i}", "title": "", "text": text}) + "\n")
    rows = [(f"d{a}", f"d{b}", int(train_y[a] == train_y[b])) for a in range(0, 60, 2) for b in (a + 1, 59 - a)]
    for split, part in (("train", rows[:40]), ("test", rows[40:])):
        lines = ["id-a\tid-b\tlabel", *(f"{a}\t{b}\t{y}" for a, b, y in part)]
        (tmp_path / "pairs" / f"{split}.tsv").write_text("\n".join(lines) + "\n")
    task = make_task(f"pairs:{tmp_path}", EvalBudget())
    task.load()
    # no pairs/dev.tsv: a seeded fifth of the training pairs is the validation part
    assert (len(task.train_pairs), len(task.parts["val"]), len(task.parts["test"])) == (32, 8, len(rows) - 40)
    assert not set(task.train_pairs) & set(task.parts["val"])
    assert task.metadata.type == "pairs"
    (tmp_path / "pairs" / "dev.tsv").write_text("d0\td1\t1\nd2\td3\t0\n")
    with_dev = make_task(f"pairs:{tmp_path}", EvalBudget())
    with_dev.load()
    assert (len(with_dev.train_pairs), len(with_dev.parts["val"])) == (40, 2)

    with pytest.raises(UnknownTask, match=r"lacks corpus\.jsonl, pairs/train\.tsv"):
        make_task(f"pairs:{tmp_path / 'pairs'}", EvalBudget())
    (tmp_path / "pairs" / "test.tsv").write_text("d1\tnope\t1\n")
    with pytest.raises(ValueError, match=r"ids not in corpus\.jsonl"):
        make_task(f"pairs:{tmp_path}", EvalBudget()).load()
