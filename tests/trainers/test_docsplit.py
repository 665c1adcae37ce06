from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from trainers.config import Hyperparameters
from trainers.pairs import build_pairs, recipes
from trainers.pairs.docsplit import split_views

sentences = st.lists(
    st.text(alphabet="abcdefgh ", min_size=1, max_size=20).map(lambda s: s.strip() or "x"),
    min_size=2,
    max_size=30,
    unique=True,
)


@settings(max_examples=200, deadline=None)
@given(sentences, st.floats(0.05, 0.95), st.integers(0, 10_000))
def test_views_are_disjoint_ordered_nonempty_and_use_every_sentence_once(doc, p, seed):
    view_a, view_b = split_views(doc, p, random.Random(seed))
    assert view_a and view_b
    assert not set(view_a) & set(view_b)
    assert sorted(view_a + view_b) == sorted(doc)
    for view in (view_a, view_b):  # order kept: a subsequence of the document
        positions = [doc.index(s) for s in view]
        assert positions == sorted(positions)


def test_split_probability_sets_the_share_of_view_a():
    doc = [f"sentence {i}" for i in range(200)]
    for p in (0.2, 0.5, 0.8):
        shares = [len(split_views(doc, p, random.Random(seed))[0]) / len(doc) for seed in range(50)]
        assert abs(sum(shares) / len(shares) - p) < 0.03


def test_single_sentence_falls_back_to_a_word_span_split():
    view_a, view_b = split_views(["one two three four"], 0.5, random.Random(0))
    assert view_a and view_b
    assert " ".join(view_a + view_b) == "one two three four"


def test_documents_too_short_for_a_pair_give_none():
    assert split_views(["single"], 0.5, random.Random(0)) is None
    assert split_views([], 0.5, random.Random(0)) is None


def test_same_seed_same_pair_and_the_sampled_p_reaches_the_builder():
    doc = [f"s{i}" for i in range(40)]
    assert "docsplit" in recipes()
    low = build_pairs("docsplit", Hyperparameters(split_probability=0.1))
    high = build_pairs("docsplit", Hyperparameters(split_probability=0.9))
    assert low(doc, random.Random(3)) == low(doc, random.Random(3))
    assert len(low(doc, random.Random(3))[0]) < len(high(doc, random.Random(3))[0])
