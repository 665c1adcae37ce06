"""The clustering tasks' score: NMI computed in NumPy, equal to scikit-learn's definition."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import normalized_mutual_info_score

from evaluators.tasks.clustering import mean_nmi, nmi


def test_nmi_equals_scikit_learns_on_random_resampled_and_degenerate_labelings():
    rng = np.random.default_rng(0)
    pairs = []
    for _ in range(500):
        n, classes, clusters = int(rng.integers(1, 120)), int(rng.integers(1, 9)), int(rng.integers(1, 9))
        labels = rng.integers(0, classes, n) * 3 + 5  # codes need not start at 0 or be consecutive
        found = rng.integers(0, clusters, n)
        rows = rng.integers(0, n, n)  # a bootstrap resample: some codes vanish
        pairs += [(labels, found), (labels[rows], found[rows]), (labels, labels), (labels, (labels * 7) % 11)]
    pairs += [(np.zeros(5, int), np.ones(5, int)), (np.zeros(5, int), np.arange(5)), (np.arange(4), np.arange(4))]
    for labels, found in pairs:
        assert nmi(labels, found) == pytest.approx(normalized_mutual_info_score(labels, found), abs=1e-12)


def test_the_tasks_score_is_the_mean_over_the_k_means_seeds():
    labels = np.array([0, 0, 1, 1, 2, 2])
    seeds = [np.array([1, 1, 0, 0, 2, 2]), np.array([0, 1, 0, 1, 0, 1])]
    items = np.column_stack([labels, *seeds])
    expected = np.mean([normalized_mutual_info_score(labels, seed) for seed in seeds])
    assert mean_nmi(items) == pytest.approx(expected, abs=1e-12) and 0 < mean_nmi(items) < 1
