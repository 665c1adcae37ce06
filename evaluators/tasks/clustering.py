"""Clustering tasks: k-means on embeddings with k = number of classes, scored by NMI against the
labels (DECA's protocol). The test part is the labelled test split of a probe data set; the
validation part is a stratified, seeded sample of its training split of the same size."""

from __future__ import annotations

import numpy as np

from doctune_core.outcomes import Outcomes
from evaluators.tasks.base import SPLIT_SEED, Embedder, Split, Task, TaskMetadata, register_task
from evaluators.tasks.orange import ORANGE_SOURCE, read_orange_tab
from evaluators.tasks.probe import stratified_subsample

KMEANS_SEEDS = 3  # k-means restarts with different seeds; the mean NMI is reported


def _entropy(counts: np.ndarray, total: int) -> float:
    shares = counts[counts > 0] / total
    return float(-np.sum(shares * np.log(shares)))


def nmi(labels: np.ndarray, clusters: np.ndarray) -> float:
    """Normalised mutual information of two labelings of the same texts (non-negative integer
    codes), with the arithmetic mean of their entropies as the normaliser: scikit-learn's
    ``normalized_mutual_info_score`` (its default), 1.0 where both put every text in one group, 0.0
    where they share no information. Computed from one contingency table in NumPy, without
    scikit-learn's argument checks, which cost about a millisecond a call: the ranking's noise check
    recomputes it on every bootstrap resample (``doctune_core.noise.item_variance``)."""
    labels, clusters = np.asarray(labels).ravel(), np.asarray(clusters).ravel()
    _, label_codes = np.unique(labels, return_inverse=True)
    _, cluster_codes = np.unique(clusters, return_inverse=True)
    rows, columns = label_codes.max() + 1, cluster_codes.max() + 1
    if rows == columns == 1:
        return 1.0
    total = len(labels)
    table = np.bincount(label_codes * columns + cluster_codes, minlength=rows * columns).reshape(rows, columns)
    in_row, in_column = table.sum(axis=1), table.sum(axis=0)
    i, j = np.nonzero(table)
    joint = table[i, j]
    mutual = float(np.sum(joint / total * (np.log(joint * total) - np.log(in_row[i] * in_column[j].astype(float)))))
    mutual = max(mutual, 0.0)
    if mutual == 0.0:
        return 0.0
    normaliser = (_entropy(in_row, total) + _entropy(in_column, total)) / 2
    return mutual / max(normaliser, float(np.finfo(float).eps))


def mean_nmi(items: np.ndarray) -> float:
    """``items``: each text's label code, then its cluster under each k-means seed."""
    return float(np.mean([nmi(items[:, 0], items[:, s]) for s in range(1, items.shape[1])]))


class OrangeClustering(Task):
    dataset: str

    def load(self) -> None:
        root = "orangecontrib/text/datasets"
        test_x, test_y = read_orange_tab(f"{root}/{self.dataset}-test.tab")
        kept = stratified_subsample(test_y, self.budget.max_test) if self.budget.max_test else range(len(test_y))
        train_x, train_y = read_orange_tab(f"{root}/{self.dataset}-train.tab")
        in_test = {test_x[i] for i in kept}  # the published splits share a few identical texts
        candidates = [i for i in range(len(train_y)) if train_x[i] not in in_test]
        val = [candidates[i] for i in stratified_subsample([train_y[i] for i in candidates], len(kept), SPLIT_SEED)]
        self.parts = {
            "val": ([train_x[i] for i in val], [train_y[i] for i in val]),
            "test": ([test_x[i] for i in kept], [test_y[i] for i in kept]),
        }
        self.sizes = {"test": {"documents": (len(kept), len(test_y))}}

    def outcomes(self, embed: Embedder, split: Split) -> Outcomes:
        from sklearn.cluster import KMeans

        texts, labels = self.parts[split]
        vectors = embed(texts)
        codes = {label: code for code, label in enumerate(sorted(set(labels)))}
        k = len(codes)
        clusters = [KMeans(k, n_init=1, random_state=seed).fit_predict(vectors) for seed in range(KMEANS_SEEDS)]
        items = np.column_stack([[codes[y] for y in labels], *clusters])
        per_seed = np.array([mean_nmi(items[:, [0, s]]) for s in range(1, items.shape[1])])
        nmi = float(np.mean(per_seed))
        return Outcomes({"main": nmi, "nmi": nmi, "nmi_std": float(np.std(per_seed))}, items, mean_nmi)


@register_task
class R8Clustering(OrangeClustering):
    dataset = "reuters-r8"
    metadata = TaskMetadata(
        name="r8-clustering",
        type="clustering",
        description="k-means (k = 8) on R8 test documents, NMI against the topics",
        source=ORANGE_SOURCE,
        split="validation: a stratified, seeded sample of the published train split (as large as test); "
        "test: the published test split (2,189)",
        main_score="nmi",
        long_inputs="chunk",
    )
