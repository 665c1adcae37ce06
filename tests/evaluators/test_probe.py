"""Probe tasks on the real labelled sets: sampling, heads, single- and multi-label scoring."""

from __future__ import annotations

import numpy as np
import pytest

from evaluators.plan import EvalBudget
from evaluators.tasks import make_task
from evaluators.tasks.probe import fewshot_indices, stratified_subsample
from evaluators.tasks.twenty_newsgroups import newsgroup_ancestors


def test_fewshot_draws_k_per_class_and_repeat_under_a_seed():
    labels = ["a"] * 20 + ["b"] * 10 + ["c"] * 2
    draw = fewshot_indices(labels, 4, seed=1)
    counts = {label: sum(labels[i] == label for i in draw) for label in "abc"}
    assert counts == {"a": 4, "b": 4, "c": 2}
    assert draw == fewshot_indices(labels, 4, seed=1)
    assert draw != fewshot_indices(labels, 4, seed=2)


def test_stratified_subsample_keeps_shares_and_rare_classes():
    labels = ["a"] * 80 + ["b"] * 18 + ["c"] * 1 + ["d"] * 1
    kept = stratified_subsample(labels, 50, seed=0)
    counts = {label: sum(labels[i] == label for i in kept) for label in "abcd"}
    assert counts == {"a": 40, "b": 9, "c": 1, "d": 1}
    assert kept == stratified_subsample(labels, 50, seed=0) and kept == sorted(kept)
    assert stratified_subsample(labels, 500) == list(range(100))


def _label_encoder(task, noise: float = 0.0):
    """An encoder that knows each text's label: one axis per label (plus optional noise)."""
    (val_texts, val_labels), (test_texts, test_labels) = task.parts["val"], task.parts["test"]
    labels = [*task.train_labels, *val_labels, *test_labels]
    names = sorted({name for label in labels for name in (label if isinstance(label, tuple) else (label,))})
    by_text = dict(zip([*task.train_texts, *val_texts, *test_texts], labels))
    rng = np.random.default_rng(0)

    def embed(texts: list[str]) -> np.ndarray:
        vectors = np.zeros((len(texts), len(names)))
        for row, text in enumerate(texts):
            label = by_text[text]
            for name in label if isinstance(label, tuple) else (label,):
                vectors[row, names.index(name)] = 1.0
        vectors += noise * rng.normal(size=vectors.shape)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

    return embed


def test_fewshot_probe_uses_k_per_class_and_scores_a_separating_encoder_perfectly():
    task = make_task("r8-fewshot", EvalBudget(fewshot_k=4, repeats=3, max_test=120))
    task.load()
    assert len(task.draws) == 3 and all(len(d) == 4 * 8 for d in task.draws)
    assert len(set(map(tuple, task.draws))) == 3  # three different draws
    perfect = task.evaluate(_label_encoder(task))
    for split in ("val", "test"):
        assert perfect[split]["macro_f1"] == 1.0 and perfect[split]["accuracy"] == 1.0
        assert perfect[split]["macro_f1_std"] == 0.0 and perfect[split]["main_se"] == 0.0
    rng = np.random.default_rng(1)
    random = task.evaluate(lambda texts: rng.normal(size=(len(texts), 16)))
    assert random["test"]["macro_f1"] < 0.5 and random["val"]["macro_f1"] < 0.5
    # the draws' part of the standard error: sample std / sqrt(3) = population std / sqrt(2); the
    # items' part is a bootstrap over the test documents; the whole is both, as independent sources
    test = random["test"]
    assert test["main_se_draws"] == pytest.approx(test["macro_f1_std"] / np.sqrt(2))
    assert 0 < test["main_se_items"] < 0.2
    assert test["main_se"] == pytest.approx(np.hypot(test["main_se_items"], test["main_se_draws"]))


@pytest.mark.parametrize("head", ["logistic", "mlp"])
def test_full_probe_trains_on_the_stratified_training_split(head):
    task = make_task("r8-probe", EvalBudget(max_train=300, max_test=150, repeats=2, probe_head=head))
    task.load()
    assert len(task.draws) == (2 if head == "mlp" else 1)  # seeds matter only for the MLP's initialisation
    assert len(task.draws[0]) == pytest.approx(300, abs=30) and len(set(task.train_labels)) == 8
    scores = task.evaluate(_label_encoder(task, noise=0.05))["test"]
    assert scores["accuracy"] > 0.9 and scores["main"] == scores["macro_f1"]


def test_newsgroup_hierarchy_keeps_prefixes_shared_by_two_groups():
    groups = ["comp.graphics", "comp.sys.mac.hardware", "comp.sys.ibm.pc.hardware", "alt.atheism", "sci.med"]
    assert newsgroup_ancestors("comp.sys.mac.hardware", groups) == ("comp.sys.mac.hardware", "comp.sys", "comp")
    assert newsgroup_ancestors("alt.atheism", groups) == ("alt.atheism",)


def test_multilabel_probe_reports_micro_and_macro_f1():
    task = make_task("20ng-hierarchy-fewshot", EvalBudget(fewshot_k=3, repeats=2, max_test=100))
    task.load()
    assert task.multilabel and ("comp.graphics", "comp") in task.train_labels
    perfect = task.evaluate(_label_encoder(task))["test"]
    assert perfect["micro_f1"] > 0.95 and perfect["macro_f1"] > 0.95 and perfect["accuracy"] > 0.8
    rng = np.random.default_rng(2)
    random = task.evaluate(lambda texts: rng.normal(size=(len(texts), 16)))["test"]
    assert random["micro_f1"] < 0.6 and random["main"] == random["micro_f1"]


@pytest.mark.parametrize("name", ["r8-fewshot", "r52-probe", "20ng-hierarchy-fewshot"])
def test_validation_documents_come_from_the_training_split_and_are_never_fitted_on(name):
    task = make_task(name, EvalBudget(fewshot_k=4, repeats=3, max_test=200, max_train=500))
    task.load()
    val_texts, test_texts = task.parts["val"][0], task.parts["test"][0]
    train_x, _, test_x, _ = task.read()  # the splits the task draws from (fresh or published)
    assert abs(len(val_texts) - len(test_texts)) <= 0.05 * len(test_texts)  # as many as test scores (stratified)
    assert set(val_texts) <= set(train_x) and set(test_texts) <= set(test_x)
    fitted = {task.train_texts[i] for draw in task.draws for i in draw}
    assert not fitted & set(val_texts) and not set(val_texts) & set(test_texts)
    # the same parts on every load (seeded), and every class keeps training examples
    again = make_task(name, EvalBudget(fewshot_k=4, repeats=3, max_test=200, max_train=500))
    again.load()
    assert again.parts["val"] == task.parts["val"] and again.draws == task.draws


def test_few_shot_scores_carry_predictions_the_bootstrap_can_resample():
    task = make_task("r8-fewshot", EvalBudget(fewshot_k=4, repeats=2, max_test=120))
    task.load()
    outcomes = task.outcomes(_label_encoder(task, noise=0.6), "test")
    # the true class, then each draw's predictions, for each test document (a stratified 120, give or take rounding)
    assert outcomes.items.shape == (len(task.parts["test"][0]), 3) and abs(outcomes.items.shape[0] - 120) <= 4
    assert outcomes.statistic(outcomes.items) == pytest.approx(outcomes.scores["main"])
    from sklearn.metrics import f1_score

    truth, first = outcomes.items[:, 0], outcomes.items[:, 1]
    assert outcomes.draws[0] == pytest.approx(f1_score(truth, first, average="macro"))  # scikit-learn's macro-F1
