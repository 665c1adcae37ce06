"""Clustering tasks: k-means on embeddings with k = number of classes, scored by NMI against the
labels (DECA's protocol). Uses the labelled test split of a probe data set."""

from __future__ import annotations

import numpy as np

from evaluators.tasks.base import Embedder, Task, TaskMetadata
from evaluators.tasks.probe import ORANGE_SOURCE, read_orange_tab, stratified_subsample

KMEANS_SEEDS = 3  # k-means restarts with different seeds; the mean NMI is reported


class OrangeClustering(Task):
    dataset: str

    def load(self) -> None:
        texts, labels = read_orange_tab(f"orangecontrib/text/datasets/{self.dataset}-test.tab")
        kept = stratified_subsample(labels, self.budget.max_test) if self.budget.max_test else range(len(labels))
        self.texts = [texts[i] for i in kept]
        self.labels = [labels[i] for i in kept]

    def evaluate(self, embed: Embedder) -> dict[str, float]:
        from sklearn.cluster import KMeans
        from sklearn.metrics import normalized_mutual_info_score

        vectors = embed(self.texts)
        k = len(set(self.labels))
        scores = [
            normalized_mutual_info_score(self.labels, KMeans(k, n_init=1, random_state=seed).fit_predict(vectors))
            for seed in range(KMEANS_SEEDS)
        ]
        return {"main": float(np.mean(scores)), "nmi": float(np.mean(scores)), "nmi_std": float(np.std(scores))}


class R8Clustering(OrangeClustering):
    dataset = "reuters-r8"
    metadata = TaskMetadata(
        name="r8-clustering",
        type="clustering",
        description="k-means (k = 8) on R8 test documents, NMI against the topics",
        source=ORANGE_SOURCE,
        split="published test (2,189)",
        main_score="nmi",
        long_inputs="chunk",
    )
