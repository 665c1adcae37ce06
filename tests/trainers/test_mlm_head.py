"""The masked-LM head trained for a base that ships none (all-MiniLM-L6-v2), at the smoke profile's
size on the packaged news corpus: better than the unigram baseline on held-out text, what a trial's
MLM term starts from, cached, and refused where it is no better."""

from __future__ import annotations

import dataclasses
import threading
import time
from pathlib import Path

import pytest
import torch
from transformers import AutoModel, AutoTokenizer

from doctune_core.data import prepare_corpus
from doctune_core.data.news import held_out_articles, pretraining_articles
from doctune_core.encoder import load_encoder, tokenize
from platform.spec import BUILTIN_PROFILES
from trainers.config import MlmHeadSettings
from trainers.losses import mask_tokens
from trainers.mlm_head import (
    MlmHeadUnavailable,
    ensure_mlm_head,
    mlm_head_entry,
    train_mlm_head,
    unigram_log_probs,
)
from trainers.model import build_module
from trainers.settings import TrialSettings

SMOKE = BUILTIN_PROFILES["smoke"]
SETTINGS = MlmHeadSettings(**SMOKE["mlm_head"])
LENGTH = SMOKE["train"]["max_length"]


@pytest.fixture(scope="module")
def corpus() -> Path:
    return prepare_corpus("news-articles", max_documents=SMOKE["corpus"]["max_documents"]).directory


def _ensure(model_dir: str, corpus: Path, cache: Path, settings: MlmHeadSettings = SETTINGS):
    began = time.perf_counter()
    head = ensure_mlm_head(
        model_dir,
        corpus,
        settings,
        max_length=LENGTH,
        seed=0,
        base_name="all-minilm-l6-v2",
        corpus_name="news-articles",
        cache=cache,
    )
    return head, time.perf_counter() - began


@pytest.fixture(scope="module")
def trained(minilm_dir, corpus, tmp_path_factory):
    cache = tmp_path_factory.mktemp("cache")
    head, seconds = _ensure(minilm_dir, corpus, cache)
    return head, seconds, cache


def test_at_smoke_size_the_head_beats_the_unigram_baseline_on_held_out_text(trained):
    head, _, _ = trained
    assert head.trained and head.path.is_dir() and head.path.parent.name == "mlm_heads"
    assert head.held_out_loss < head.unigram_loss < 10.0  # ln(30522) = 10.3: the baseline itself is informed
    print(f"held-out MLM loss {head.held_out_loss:.4f}, unigram {head.unigram_loss:.4f}, {head.seconds:.1f} s")


def test_a_trials_mlm_term_starts_from_the_trained_head_on_the_unchanged_encoder(trained, minilm_dir):
    """What ``build_module`` loads from the head's directory predicts masked words of unseen news
    (held-out articles' openings) far better than the random head trials started from before, and
    its encoder is the base's, bit for bit."""
    head, _, _ = trained
    module, tokenizer = build_module(str(head.path), TrialSettings(mlm_weight=0.1))
    fresh, _ = load_encoder(minilm_dir, with_mlm_head=True, new_head=True)
    batch = tokenize(tokenizer, [a.text for a in held_out_articles("val")[:32]], LENGTH)
    never = batch["special_tokens_mask"] | (1 - batch["attention_mask"])
    masked, labels = mask_tokens(
        batch["input_ids"], never, tokenizer.mask_token_id, len(tokenizer), torch.Generator().manual_seed(0)
    )
    module.eval(), fresh.eval()
    with torch.no_grad():
        trained_loss = float(module.mlm_loss(masked, batch["attention_mask"], labels))
        random_loss = float(fresh(input_ids=masked, attention_mask=batch["attention_mask"], labels=labels).loss)
    assert random_loss > 10.0 and random_loss - trained_loss > 1.5, (trained_loss, random_loss)  # 8.1 and 10.6 seen
    base = AutoModel.from_pretrained(minilm_dir, add_pooling_layer=False).state_dict()
    loaded = module.encoder.state_dict()
    assert base.keys() == loaded.keys()
    assert all(torch.equal(loaded[name], tensor) for name, tensor in base.items())


def test_a_second_call_reuses_the_cached_head(trained, minilm_dir, corpus):
    head, first_seconds, cache = trained
    weights = head.path / "model.safetensors"
    written = weights.stat().st_mtime_ns
    again, seconds = _ensure(minilm_dir, corpus, cache)
    assert again.path == head.path and not again.trained
    assert (again.held_out_loss, again.unigram_loss) == (head.held_out_loss, head.unigram_loss)
    assert weights.stat().st_mtime_ns == written and seconds < first_seconds / 5, (seconds, first_seconds)
    assert not list(cache.glob("mlm_heads/*.partial"))


def test_every_setting_the_base_and_the_corpus_are_in_the_cache_key(minilm_dir, corpus, minilm_with_mlm_head):
    entry = mlm_head_entry(minilm_dir, corpus, SETTINGS, LENGTH, 0)
    for field in dataclasses.fields(MlmHeadSettings):
        changed = dataclasses.replace(SETTINGS, **{field.name: getattr(SETTINGS, field.name) * 2})
        assert mlm_head_entry(minilm_dir, corpus, changed, LENGTH, 0) != entry, field.name
    assert mlm_head_entry(minilm_dir, corpus, SETTINGS, 2 * LENGTH, 0) != entry
    assert mlm_head_entry(minilm_dir, corpus, SETTINGS, LENGTH, 1) != entry
    assert mlm_head_entry(minilm_with_mlm_head, corpus, SETTINGS, LENGTH, 0) != entry  # other weights
    other_corpus = prepare_corpus("news-articles", max_documents=200).directory
    assert mlm_head_entry(minilm_dir, other_corpus, SETTINGS, LENGTH, 0) != entry


@pytest.mark.slow  # trains a head (about 10 s on 2 idle CPUs)
def test_a_head_no_better_than_unigram_is_refused_trained_once_and_refused_again_at_once(minilm_dir, corpus, tmp_path):
    """Two callers at once (two searches starting together) train it once under the lock; both
    are refused with one message saying what to change, and the refusal is cached."""
    diverging = dataclasses.replace(SETTINGS, lr=1.0)  # a step of about 1 on every weight of the transform
    outcomes: list = []

    def ask() -> None:
        try:
            outcomes.append(_ensure(minilm_dir, corpus, tmp_path, diverging))
        except MlmHeadUnavailable as err:
            outcomes.append(err)

    callers = [threading.Thread(target=ask) for _ in range(2)]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join()
    assert len(outcomes) == 2 and all(isinstance(o, MlmHeadUnavailable) for o in outcomes), outcomes
    message = str(outcomes[0])
    assert "no better than predicting the corpus's unigram token distribution" in message
    assert "set mlm_weight to 0" in message and "mlm_head.sequences" in message
    assert len(list(tmp_path.glob("mlm_heads/*/model.safetensors"))) == 1
    began = time.perf_counter()
    with pytest.raises(MlmHeadUnavailable, match="no better than"):
        _ensure(minilm_dir, corpus, tmp_path, diverging)
    assert time.perf_counter() - began < 5


def test_a_corpus_too_small_for_the_heads_sequences_is_refused_before_any_training(minilm_dir, tmp_path):
    notes = iter([f"Short note number {i} about the budget." for i in range(50)])
    with pytest.raises(MlmHeadUnavailable, match=r"too little text for the masked-LM head.*lower mlm_head\.sequences"):
        train_mlm_head(minilm_dir, notes, SETTINGS, LENGTH, 0, tmp_path / "head")
    assert not (tmp_path / "head").exists()


def test_the_unigram_baseline_smooths_as_leave_one_out_says(minilm_dir):
    """Alpha is chosen on the counts alone, and it predicts unseen text better than Laplace's
    add-one (which, with 30,522 word pieces and a few thousand tokens, gives most of the mass to
    pieces the text never uses)."""
    tokenizer = AutoTokenizer.from_pretrained(minilm_dir)
    articles = pretraining_articles()

    def counts(texts: list[str]) -> torch.Tensor:
        ids = [i for text in texts for i in tokenizer(text, add_special_tokens=False)["input_ids"]]
        return torch.bincount(torch.tensor(ids), minlength=len(tokenizer))

    seen, unseen = counts([a.text for a in articles[:20]]), counts([a.text for a in articles[20:40]])
    log_probs, alpha = unigram_log_probs(seen)
    laplace = torch.log((seen + 1.0) / (seen.sum() + len(seen)))
    assert float(log_probs.exp().sum()) == pytest.approx(1.0, abs=1e-4)
    assert alpha < 1.0
    assert float((unseen * log_probs).sum()) > float((unseen * laplace).sum())
