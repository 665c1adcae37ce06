"""A probe's scores over its draws (``evaluators.tasks.probe``): each draw's predictions beside the
truth, one row an item, and each score's mean over the draws; the main scores' influence of each
item (what a gain's interval is made of: ``doctune_core.noise``)."""

from __future__ import annotations

import numpy as np


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
