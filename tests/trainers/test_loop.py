"""The trial's module and batches, without Ray: what every worker builds before training."""

from __future__ import annotations

import threading

import torch

from trainers.config import Hyperparameters
from trainers.loop import PairStream, Prefetched, build_module
from trainers.pairs import PairContext, build_pairs


def test_module_trains_with_dropout_so_identical_views_differ(minilm_dir):
    module, tokenizer = build_module(minilm_dir, Hyperparameters(recipe="simcse", mlm_weight=0.0))
    assert module.training
    batch = tokenizer(["the same text", "the same text"], return_tensors="pt")
    embeddings = module(batch["input_ids"], batch["attention_mask"])["embeddings"]
    assert not torch.allclose(embeddings[0], embeddings[1])


def test_module_carries_the_heads_the_hyperparameters_ask_for(minilm_dir):
    module, _ = build_module(minilm_dir, Hyperparameters(loss="simsiam", bregman_weight=1.0, bregman_k=8))
    assert module.with_mlm and module.heads.predictor is not None
    assert module.heads.bregman.k == 8


def test_pair_stream_is_deterministic_per_step_and_skips_unusable_documents():
    documents = [["one two three.", "four five."], ["x"], ["alpha beta.", "gamma delta.", "epsilon."]]
    context = PairContext(Hyperparameters(), 64, lambda t: len(t.split()), documents)
    stream = PairStream(documents, build_pairs(context), batch_size=3, seed=7, rank=0)
    assert stream.skipped == 1 and len(stream.documents) == 2
    assert stream.batch(5) == stream.batch(5)
    again = PairStream(documents, build_pairs(context), batch_size=3, seed=7, rank=0)
    assert again.batch(5) == stream.batch(5)  # what a resumed worker sees
    other_rank = PairStream(documents, build_pairs(context), batch_size=3, seed=7, rank=1)
    assert any(other_rank.batch(s) != stream.batch(s) for s in range(5))


def test_prefetched_batches_are_the_inline_ones_built_on_another_thread():
    builders: list[str] = []

    def build(step: int) -> int:
        builders.append(threading.current_thread().name)
        return step * step

    batches = Prefetched(build, stop=5)
    assert [batches(step) for step in range(2, 5)] == [4, 9, 16]  # a resumed loop starts mid-way
    batches.close()
    assert len(builders) == 3 and all(name.startswith("doctune-batches") for name in builders)
