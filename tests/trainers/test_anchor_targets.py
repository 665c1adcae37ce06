"""The anchor term's texts and targets: short pretraining texts, the start's embeddings of them,
computed once and kept."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from doctune_core.encoder import embed_texts, load_encoder
from tests.conftest import written_corpus
from trainers.anchor_targets import ANCHOR_WORDS, TEXTS, AnchorTargets, anchor_dir, anchor_texts, ensure_anchor_targets


def _documents() -> list[list[str]]:
    rng = random.Random(1)
    words = "market council river season vote harvest engine court station museum".split()
    sentences = lambda: [" ".join(rng.choices(words, k=rng.randint(3, 40))) + "." for _ in range(6)]  # noqa: E731
    return [sentences() for _ in range(30)] + [[]]


def test_each_anchor_text_is_the_opening_of_a_pretraining_document_and_short(tmp_path):
    documents = _documents()
    corpus = written_corpus(tmp_path / "corpus", documents)
    texts = anchor_texts(corpus, count=10)
    openings = [" ".join(d) for d in documents if d]
    assert len(texts) == 10
    for text in texts:
        assert 1 <= len(text.split()) <= ANCHOR_WORDS
        assert any(opening.startswith(text) for opening in openings)  # a document's first words, nothing else
    assert len({len(t.split()) for t in texts}) > 3  # lengths spread between a sentence and a lead
    assert anchor_texts(corpus, count=10) == texts  # the same texts for every trial


def test_the_targets_are_the_start_s_embeddings_computed_once_per_pooling(tmp_path, monkeypatch, minilm_dir):
    monkeypatch.setenv("DOCTUNE_CACHE", str(tmp_path / "cache"))
    corpus = written_corpus(tmp_path / "corpus", _documents())
    directory = ensure_anchor_targets(minilm_dir, corpus, ["mean"], max_length=128)
    assert directory == anchor_dir(minilm_dir, corpus, 128) and sorted(p.name for p in directory.iterdir()) == [
        "mean.npy",
        TEXTS,
    ]
    pool = AnchorTargets.load(directory, "mean")
    model, tokenizer = load_encoder(minilm_dir)
    with torch.inference_mode():
        expected = embed_texts(model, tokenizer, pool.texts[:4], pooling="mean", max_length=128)
    np.testing.assert_allclose(pool.targets[:4].numpy(), expected, atol=1e-5)
    stamp = (directory / "mean.npy").stat().st_mtime_ns
    assert ensure_anchor_targets(minilm_dir, corpus, ["mean", "cls"], max_length=128) == directory
    assert (directory / "mean.npy").stat().st_mtime_ns == stamp  # kept; only the new pooling is embedded
    assert AnchorTargets.load(directory, "cls").targets.shape == pool.targets.shape
    assert anchor_dir(minilm_dir, corpus, 256) != directory  # another length, other targets


def test_a_worker_draws_its_texts_without_repeats_seeded_by_its_step(tmp_path):
    pool = AnchorTargets([f"text {i}" for i in range(20)], torch.arange(20.0)[:, None].repeat(1, 3))
    texts, targets = pool.draw(8, random.Random("0/0/anchors5"))
    assert len(set(texts)) == 8 and [int(t[0]) for t in targets] == [int(x.split()[1]) for x in texts]
    assert pool.draw(8, random.Random("0/0/anchors5"))[0] == texts
    assert pool.draw(8, random.Random("0/0/anchors6"))[0] != texts
    assert len(pool.draw(50, random.Random(0))[0]) == 20  # a pool smaller than the draw: all of it, once


@pytest.mark.parametrize("pooling", ["mean", "cls"])
def test_an_untrained_start_scores_no_anchor_loss_against_its_own_targets(tmp_path, monkeypatch, minilm_dir, pooling):
    from trainers.losses import anchor_loss
    from trainers.model import build_module
    from trainers.settings import TrialSettings

    monkeypatch.setenv("DOCTUNE_CACHE", str(tmp_path / "cache"))
    corpus = written_corpus(tmp_path / "corpus", _documents())
    pool = AnchorTargets.load(ensure_anchor_targets(minilm_dir, corpus, [pooling], max_length=128), pooling)
    module, tokenizer = build_module(minilm_dir, TrialSettings(mlm_weight=0.0, pooling=pooling))
    module.eval()  # as the targets were embedded: no dropout
    texts, targets = pool.draw(6, random.Random(0))
    batch = tokenizer(texts, padding=True, truncation=True, max_length=128, return_tensors="pt")
    with torch.inference_mode():
        embeddings = module.embed(batch["input_ids"], batch["attention_mask"])
    assert anchor_loss(embeddings, targets).item() < 1e-6
