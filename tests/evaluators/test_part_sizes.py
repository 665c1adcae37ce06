"""The part-size warning's references are the measured ones (bench/results/ranking_noise.json)."""

from __future__ import annotations

import json

import pytest

from evaluators.part_sizes import references
from tests.conftest import ROOT


def test_the_references_are_the_medians_bench_ranking_noise_measured():
    measured = json.loads((ROOT / "bench" / "results" / "ranking_noise.json").read_text())["tasks"]
    declared = references()
    assert set(declared) == {"retrieval", "probe"}
    for task, reference in declared.values():
        figures = measured[task]
        assert reference.sigma == pytest.approx(figures["sigma"], abs=5e-4)
        assert reference.typical_difference == pytest.approx(figures["typical_difference"], abs=5e-5)
