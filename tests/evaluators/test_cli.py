"""``python -m evaluators``: the standalone scorer, on the same code path as the actors."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import zlib

import numpy as np
import pytest

from evaluators.plan import EvalBudget
from evaluators.readings import READINGS_ENV
from evaluators.tasks import make_task
from evaluators.tasks.length import ELONGATIONS, elongate
from tests.conftest import ROOT, shared_collection


def _cli(*args: str, env: dict | None = None):
    return subprocess.run(
        [sys.executable, "-m", "evaluators", *args], cwd=ROOT, capture_output=True, text=True, timeout=600, env=env
    )


@pytest.mark.slow  # every kind of task on a real encoder, few and short texts: about 40 s
def test_cli_scores_a_model_on_every_kind_of_task(tmp_path):
    out = tmp_path / "scores.json"
    done = _cli(
        "--model",
        "all-minilm-l6-v2",
        "--task",
        "news-title-retrieval",
        "--task",
        "r8-fewshot",
        "--task",
        "r8-clustering",
        "--task",
        "length-robustness",
        "--beir",
        str(shared_collection("cisi")),
        "--max-documents",
        "60",
        "--max-queries",
        "30",
        "--max-test",
        "40",
        "--fewshot-k",
        "4",
        "--repeats",
        "2",
        "--max-length",
        "64",
        "--part",
        "test",
        "--json",
        str(out),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "scored on the locked test part" in done.stdout and "part digest " in done.stdout
    scores = json.loads(out.read_text())["scores"]
    assert len(scores) == 5
    for values in scores.values():  # the part asked for alone, with its standard error; the split recorded
        assert "val" not in values and math.isfinite(values["test"]["main"]) and values["test"]["main_se"] >= 0
        assert values["split"]
    assert 0 < scores["r8-clustering"]["test"]["nmi"] <= 1
    length = scores["length-robustness"]["test"]
    assert length["main"] == -length["mean_abs_shift"]
    assert "news-title-retrieval" in done.stdout and "length-robustness" in done.stdout


@pytest.mark.slow  # the real-text long task, read at 256 tokens: about 20 s
def test_cli_scores_validation_unless_the_locked_part_is_asked_for(tmp_path):
    out = tmp_path / "scores.json"
    args = ("--model", "all-minilm-l6-v2", "--task", "news-passage-retrieval", "--long-length", "256")
    done = _cli(*args, "--max-queries", "10", "--json", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "scored on the validation part" in done.stdout and "news-passage-retrieval val" in done.stdout
    scored = json.loads(out.read_text())["scores"]["news-passage-retrieval"]
    assert "val" in scored and "test" not in scored
    refused = _cli(*args, "--part", "dev")
    assert refused.returncode == 2 and "invalid choice: 'dev'" in refused.stderr


@pytest.mark.slow  # three scorings of a few news titles at 64 tokens: about 30 s
def test_each_reading_of_a_locked_part_is_entered_in_the_ledger_and_said_with_the_scores(tmp_path):
    ledger = tmp_path / "readings.jsonl"
    env = os.environ | {READINGS_ENV: str(ledger)}
    args = ("--model", "all-minilm-l6-v2", "--task", "news-title-retrieval", "--max-queries", "10")
    args += ("--max-documents", "40", "--max-length", "64")
    first = _cli(*args, "--part", "test", env=env)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "the locked part's first reading on this cache" in first.stdout
    second = _cli(*args, "--part", "test", env=env)
    assert "locked part read once before on this cache: this verdict is not independent" in second.stdout
    validation = _cli(*args, env=env)  # validation reads no locked part: nothing entered, nothing said
    assert validation.returncode == 0 and "before on this cache" not in validation.stdout
    (entry, _) = [json.loads(line) for line in ledger.read_text().splitlines()]
    digest = int(second.stdout.split("part digest ")[1].split(")")[0])
    assert entry["parts"] == {"news-title-retrieval": digest} and "all-minilm-l6-v2" in entry["what"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--model", "all-minilm-l6-v2", "--task", "nope"), "unknown task 'nope'"),
        (("--model", "/no/such/model", "--task", "r8-fewshot"), "does not exist"),
        (("--task", "r8-fewshot"), "name a --model"),
    ],
)
def test_cli_bad_input_exits_2_with_the_reason(args, message):
    done = _cli(*args)
    assert done.returncode == 2 and message in done.stderr


def test_cli_lists_every_task():
    done = _cli("--list")
    assert done.returncode == 0
    for name in (
        "news-title-retrieval",
        "r8-fewshot",
        "r52-fewshot",
        "20ng-fewshot",
        "r8-clustering",
        "length-robustness",
        "beir:<location>",
        "beir-hf:<location>",
        "pairs:<location>",
        "20ng-hierarchy-fewshot",
        "r8-probe",
        "20ng-topic-pairs",
    ):
        assert name in done.stdout


def test_length_robustness_measures_the_shift_of_an_elongation_sensitive_encoder():
    task = make_task("length-robustness", EvalBudget(max_queries=20))
    task.load()
    val, test = task.parts["val"], task.parts["test"]
    assert len(test) == len(val) == 21 and len(set(test)) == 21 and not set(val) & set(test)
    assert all(len(t.split()) >= 8 for t in test)  # no datelines

    def length_sensitive(texts: list[str]) -> np.ndarray:
        # a toy encoder: a text-specific random direction plus a shared axis that grows with length,
        # so elongation raises the similarity of unrelated texts (the length attack)
        def vector(text: str) -> np.ndarray:
            own = np.random.default_rng(zlib.crc32(" ".join(text.split()[:5]).encode())).normal(size=8)
            return np.concatenate([[len(text) / 500.0], own / np.linalg.norm(own)])

        vectors = np.array([vector(t) for t in texts])
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

    scores = task.evaluate(length_sensitive)["test"]
    assert all(f"shift_m{m}" in scores for m in ELONGATIONS)
    assert scores["shift_m8"] > scores["shift_m2"] > 0
    assert elongate("ab", 3) == "ab ab ab"


def test_clustering_nmi_is_one_for_an_encoder_that_separates_the_classes():
    task = make_task("r8-clustering", EvalBudget(max_test=60))
    task.load()
    (val_texts, val_labels), (texts, labels) = task.parts["val"], task.parts["test"]
    assert abs(len(val_texts) - len(texts)) <= 3 and not set(val_texts) & set(texts)
    classes = sorted(set(labels))
    by_text = dict(zip([*val_texts, *texts], [*val_labels, *labels]))
    perfect = task.evaluate(lambda texts: np.eye(len(classes))[[classes.index(by_text[t]) for t in texts]])
    assert perfect["test"]["nmi"] == pytest.approx(1.0) and perfect["val"]["nmi"] == pytest.approx(1.0)


def test_length_robustness_counts_shifts_up_and_down_alike():
    from evaluators.tasks.length import robustness

    opposite = np.array([[0.1, 0.2, 0.3], [-0.1, -0.2, -0.3]])  # one pair up, one down, at each m
    assert robustness(opposite) == pytest.approx(-0.2)  # the mean of the per-pair shifts would say 0
    assert robustness(np.zeros((4, 3))) == 0.0
