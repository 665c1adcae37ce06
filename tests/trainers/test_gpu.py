"""The GPU paths: a bf16 training step (both views in one forward, the MLM term) and an
evaluator that holds a GPU embedding on it."""

from __future__ import annotations

import pytest
import torch

from doctune_core.encoder import tokenize
from trainers.losses import mask_tokens
from trainers.model import build_module
from trainers.settings import TrialSettings
from trainers.training_loss import training_loss

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU; this machine has none"),
]


def bf16_step(model_dir: str, device: str) -> tuple[torch.Tensor, dict[str, float], bool]:
    """One training step as ``train_loop_per_worker`` runs it with ``train.bf16``: (loss, logged
    terms, whether the word embeddings changed)."""
    hp = TrialSettings(recipe="docsplit", mlm_weight=0.1, temperature=0.05)
    module, tokenizer = build_module(model_dir, hp)
    module.to(device)
    optimizer = torch.optim.AdamW(module.parameters(), lr=1e-4)
    texts = ["first view of a document.", "a second, different document.", "view b one.", "view b two."]
    batch = tokenize(tokenizer, texts, 64)
    masked, labels = mask_tokens(
        batch["input_ids"][:2],
        batch["special_tokens_mask"][:2] | (1 - batch["attention_mask"][:2]),
        tokenizer.mask_token_id,
        len(tokenizer),
    )
    mask = batch["attention_mask"].to(device)
    weights = module.encoder.embeddings.word_embeddings.weight
    before = weights.detach().clone()
    with torch.autocast(device, dtype=torch.bfloat16):
        outputs = module(batch["input_ids"].to(device), mask, masked.to(device), labels.to(device), mask[:2])
        loss, terms = training_loss(hp, outputs)
    loss.backward()
    optimizer.step()
    return loss, terms, not torch.equal(before, weights.detach())


def test_bf16_step_on_gpu_is_finite_and_updates_weights(minilm_with_mlm_head):
    loss, terms, updated = bf16_step(minilm_with_mlm_head, "cuda")
    assert loss.dtype == torch.float32  # the loss arithmetic is promoted (trainers/losses/precision.py)
    assert torch.isfinite(loss)
    assert terms["mlm_loss"] > 0 and terms["contrastive_loss"] > 0
    assert updated


def test_an_evaluator_holding_a_gpu_embeds_on_it_and_scores_as_on_cpu(minilm_dir, tmp_path):
    """``gpus_per_evaluator`` > 0: the actor embeds on its GPU; an actor holding none embeds on
    the CPU. Both score the same checkpoint alike (fp32 on both)."""
    import ray

    from evaluators.plan import EvalBudget, EvalPlan
    from evaluators.pool import EvaluatorPool

    def plan(name: str) -> EvalPlan:
        return EvalPlan(
            objectives={"objective": {"r8-clustering": 1.0}},
            actor_names=(name,),
            namespace="doctune-gpu-test",
            budget=EvalBudget(max_test=300),
            max_length=128,
            batch_size=16,
            threads=1,
        )

    ray.init(num_cpus=2, num_gpus=1, include_dashboard=False, log_to_driver=False)
    try:
        (on_gpu,) = EvaluatorPool(plan("gpu-evaluator"), str(tmp_path / "gpu"), 1, gpus_per_actor=0.5).start().actors
        # Ray 2.60 leaves CUDA_VISIBLE_DEVICES alone for an actor holding no GPU: it sees the GPU too
        (on_cpu,) = EvaluatorPool(plan("cpu-evaluator"), str(tmp_path / "cpu"), cpus_per_actor=1).start().actors
        assert ray.get(on_gpu.__ray_call__.remote(lambda self: self.device)) == "cuda"
        assert ray.get(on_cpu.__ray_call__.remote(lambda self: self.device)) == "cpu"
        gpu_scores, cpu_scores = ray.get([a.score.remote(minilm_dir, "mean") for a in (on_gpu, on_cpu)])
    finally:
        ray.shutdown()
    assert gpu_scores["r8-clustering"]["nmi"] == pytest.approx(cpu_scores["r8-clustering"]["nmi"], abs=0.02)
