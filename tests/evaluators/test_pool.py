"""The evaluator actor pool on a real local Ray: restart after a kill, missing checkpoints, the parts a
caller's plan reads."""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import threading
import time

import pytest

from evaluators.plan import EvalBudget, EvalPlan
from evaluators.pool import CheckpointScorer, EvaluatorPool
from evaluators.pool_calls import CheckpointMissing, checkpoint_outcomes, score_checkpoint

pytestmark = pytest.mark.ray  # starts Ray

PLAN = EvalPlan(
    objectives={"objective": {"r8-clustering": 1.0}},
    actor_names=("pool-test-0",),
    namespace="doctune-pool-test",
    budget=EvalBudget(max_test=150),  # both parts take tens of seconds to embed: the kill lands inside
    max_length=128,
    batch_size=16,
    threads=1,
)


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        with EvaluatorPool(PLAN, str(tmp_path_factory.mktemp("run")), cpus_per_actor=1) as evaluators:
            yield evaluators.actors
    finally:
        ray.shutdown()


def _actor_pid(actor) -> int:
    import ray

    return ray.get(actor.__ray_call__.remote(lambda self: os.getpid()))


def test_a_killed_evaluator_restarts_and_the_score_still_arrives(pool, minilm_dir, tmp_path):
    checkpoint = shutil.copytree(minilm_dir, tmp_path / "checkpoint")
    before = _actor_pid(pool[0])
    result: dict = {}
    call = threading.Thread(target=lambda: result.update(score_checkpoint(PLAN, str(checkpoint), "mean")))
    call.start()
    time.sleep(3.0)  # the model is loaded and embedding has begun
    assert call.is_alive(), "the scoring call finished before the kill; make the task larger"
    os.kill(before, signal.SIGKILL)
    call.join(timeout=300)
    assert 0 < result["r8-clustering"]["test"]["nmi"] <= 1
    assert _actor_pid(pool[0]) != before  # a restarted actor answered
    # the item-level outcomes behind the score come back through the pool (from its embedding cache)
    outcomes = checkpoint_outcomes(PLAN, str(checkpoint), "mean", ["r8-clustering"], "test")["r8-clustering"]
    n = int(result["r8-clustering"]["test"]["n"])
    assert outcomes.items.shape == (n, 4) and n > 100  # label, then the cluster of each k-means seed
    assert outcomes.statistic(outcomes.items) == pytest.approx(result["r8-clustering"]["test"]["main"])


def test_a_plan_that_reads_validation_only_gets_no_test_score(pool, minilm_dir, tmp_path):
    """A search's rounds score through such a plan: the actors hold both parts, the caller's plan
    says which are read, so no round reads the locked test part."""
    checkpoint = shutil.copytree(minilm_dir, tmp_path / "checkpoint")
    rounds = dataclasses.replace(PLAN, parts=("val",))
    scores = score_checkpoint(rounds, str(checkpoint), "mean")
    assert "val" in scores["r8-clustering"] and "test" not in scores["r8-clustering"]
    reported = CheckpointScorer(rounds).metrics(scores)
    assert reported["objective"] == scores["r8-clustering"]["val"]["main"]
    assert not any(key.startswith("test") for key in reported), sorted(reported)


def test_a_deleted_checkpoint_is_reported_not_retried(pool, tmp_path):
    began = time.perf_counter()
    with pytest.raises(CheckpointMissing, match="no longer exists"):
        score_checkpoint(PLAN, str(tmp_path / "gone"), "mean")
    assert time.perf_counter() - began < 30
