"""Positive-pair builders: the properties each recipe promises."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainers.augment.word_level import AugmentationUnavailable, check_augmentation
from trainers.pairs import build_pairs, recipes
from trainers.pairs.docsplit import split_views
from trainers.pairs.laser import elongation_cap
from trainers.settings import TrialSettings

sentences = st.lists(
    st.text(alphabet="abcdefgh ", min_size=1, max_size=20).map(lambda s: s.strip() or "x"),
    min_size=2,
    max_size=30,
    unique=True,
)
CORPUS = [
    ["The big house stood on a quiet street.", "A small garden grew behind it."],
    ["Good news arrived early.", "The market rose quickly and the bank was happy."],
    ["Elections were held in the large city.", "Voters chose a new mayor."],
]


def context(documents=CORPUS, max_length: int = 256, **hp) -> tuple:
    """``build_pairs``' arguments: a trial's settings and a word count as the token count."""
    return TrialSettings(**hp), max_length, lambda text: len(text.split()), documents


def test_every_recipe_is_registered():
    assert recipes() == ["crops", "deca", "docsplit", "laser", "simcse", "span"]


# --- docsplit ---------------------------------------------------------------------------------


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


@pytest.mark.parametrize("n", [2, 3, 10])
@pytest.mark.parametrize("p", [0.3, 0.5, 0.7])
def test_each_sentence_goes_to_view_a_with_probability_p_where_nonempty_views_allow_it(n, p):
    """Exactly p per sentence; where both views non-empty cannot give p (a sentence's chance lies in
    [1/n, 1 - 1/n]), the nearest achievable. Redrawing empty views, as before, gave 0.43 for n = 3,
    p = 0.3 and 0.31 for n = 10."""
    from trainers.pairs.docsplit import split_counts

    expected = min(max(p, 1 / n), 1 - 1 / n)
    sizes, probabilities = split_counts(n, p)
    assert sum(k * q for k, q in zip(sizes, probabilities)) / n == pytest.approx(expected, abs=1e-9)
    doc = [f"sentence {i}" for i in range(n)]
    draws = 20_000
    rng = random.Random(0)
    counts = Counter(s for _ in range(draws) for s in split_views(doc, p, rng)[0])
    for sentence in doc:  # every position, not only the average: the marginal of each sentence
        assert counts[sentence] / draws == pytest.approx(expected, abs=0.015)


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
    low = build_pairs(*context(split_probability=0.1))
    high = build_pairs(*context(split_probability=0.9))
    assert low(doc, random.Random(3)) == low(doc, random.Random(3))
    assert len(low(doc, random.Random(3))[0]) < len(high(doc, random.Random(3))[0])


def test_docsplit_with_elongation_repeats_view_a_within_the_budget():
    doc = ["one two three.", "four five six.", "seven eight nine.", "ten eleven twelve."]
    build = build_pairs(*context(max_length=20, elongate=True, elongation_min=2, elongation_max=50))
    for seed in range(20):
        view_a, view_b = build(doc, random.Random(seed))
        words = view_a.split()
        assert len(words) <= 20 - 2 and not set(view_b.split()) & set(words)
        unit = len(words) // next(m for m in range(2, 50) if words[: len(words) // m] * m == words)
        assert words == words[:unit] * (len(words) // unit)


# --- augmentation types (views) -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("views", "recipe"),
    [
        ("split", {"recipe": "docsplit"}),
        ("split+elongation", {"recipe": "docsplit", "elongate": True}),
        ("elongation", {"recipe": "laser"}),
        ("word", {"recipe": "deca"}),
    ],
)
def test_each_augmentation_type_makes_its_views_as_its_recipe_does(views, recipe):
    documents = _frequent("big", "large", "house", "quiet", "street", "garden")
    doc = ["The big house stood on a quiet street.", "A large garden grew behind it.", "Nobody came."]
    by_type = build_pairs(*context(documents, views=views, elongation_min=2, elongation_max=3))
    by_recipe = build_pairs(*context(documents, elongation_min=2, elongation_max=3, **recipe))
    pairs = [by_type(doc, random.Random(seed)) for seed in range(10)]
    assert pairs == [by_recipe(doc, random.Random(seed)) for seed in range(10)]
    assert len(set(pairs)) > 1  # the views are drawn, not fixed


# --- simcse -----------------------------------------------------------------------------------


def test_simcse_pairs_a_text_with_itself():
    view_a, view_b = build_pairs(*context(recipe="simcse"))(CORPUS[0], random.Random(0))
    assert view_a == view_b == " ".join(CORPUS[0])


# --- laser ------------------------------------------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 30), st.integers(1, 30), st.integers(8, 300), st.integers(0, 1000))
def test_laser_m_is_within_the_range_and_fits_max_length(m_min, m_max, max_length, seed):
    doc = ["alpha beta gamma delta epsilon.", "zeta eta theta."]
    build = build_pairs(
        *context(recipe="laser", anchor="first", elongation_min=m_min, elongation_max=m_max, max_length=max_length)
    )
    anchor, elongated = build(doc, random.Random(seed))
    m = len(elongated.split()) // len(anchor.split())
    assert elongated == " ".join([anchor] * m)
    low, high = min(m_min, m_max), max(m_min, m_max)
    cap = elongation_cap(5, max_length)
    assert min(low, cap) <= m <= min(high, cap)
    assert m * 5 <= max(5, max_length - 2)


def test_laser_paper_example_a_ten_token_sentence_at_256_gives_m_up_to_25():
    assert elongation_cap(10, 256) == 25


@pytest.mark.parametrize(("tokens", "low", "high"), [(30, 1, 25), (10, 1, 25), (50, 2, 25)])
def test_laser_m_is_uniform_over_the_range_capped_by_the_budget(tokens, low, high):
    """LA(SER)^3 §4: m uniform on [1, floor(256 / length)], not drawn from [1, 25] and then capped."""
    from scipy.stats import chisquare

    from trainers.pairs.laser import draw_m

    rng = random.Random(0)
    cap = elongation_cap(tokens, 256)
    support = range(min(low, cap), min(high, cap) + 1)
    draws = [draw_m(low, high, tokens, 256, rng) for _ in range(4000)]
    counts = [draws.count(m) for m in support]
    assert sum(counts) == len(draws)  # nothing outside the capped range
    assert chisquare(counts).pvalue > 0.01  # uniform over it (the old draw put 72% at m = 8 for 30 tokens)


def test_laser_anchors_on_the_first_sentence_by_default():
    doc = [f"sentence number {i}." for i in range(10)]
    build = build_pairs(*context(recipe="laser"))
    assert {build(doc, random.Random(seed))[0] for seed in range(20)} == {"sentence number 0."}


def test_laser_intra_reference_pairs_the_elongated_anchor_with_the_rest():
    doc = ["first sentence here.", "second one.", "third one."]
    build = build_pairs(
        *context(recipe="laser", laser_mode="intra", anchor="first", elongation_min=3, elongation_max=3)
    )
    elongated, rest = build(doc, random.Random(0))
    assert elongated == " ".join(["first sentence here."] * 3)
    assert rest == "second one. third one."


def test_laser_random_anchor_varies_and_the_range_reaches_the_builder():
    doc = [f"sentence number {i}." for i in range(10)]
    build = build_pairs(*context(recipe="laser", anchor="random", elongation_min=1, elongation_max=4))
    anchors = {build(doc, random.Random(seed))[0] for seed in range(40)}
    assert len(anchors) > 3
    wide = build_pairs(*context(recipe="laser", elongation_min=8, elongation_max=8))
    assert len(wide(doc, random.Random(0))[1].split()) == 8 * 3


# --- deca -------------------------------------------------------------------------------------

LONG_DOC = [("The big house and the good road near the large old bank were quiet. " * 20).strip()]


def changed_share(original: str, augmented: str) -> float:
    a, b = original.split(), augmented.split()
    return sum(x != y for x, y in zip(a, b)) / len(a)


def _frequent(*words: str) -> list[list[str]]:
    """A corpus that holds each word often enough (``LOW_FREQUENCY``) for the dictionary constraint."""
    from trainers.augment.word_level import LOW_FREQUENCY

    return [[" ".join(words)]] * LOW_FREQUENCY


@pytest.mark.parametrize("p", [0.1, 0.3])
def test_deca_synonym_rate_replaces_about_aug_p_of_eligible_words_from_the_vocabulary(p):
    from trainers.augment.wordnet import wordnet

    vocabulary = {w.strip(".").lower() for d in [*CORPUS, LONG_DOC] for s in d for w in s.split()} | {
        "great",
        "road",
        "street",
        "adult",
        "full",
        "near",
        "right",
        "dear",
        "sound",
        "beneficial",
    }
    documents = [*CORPUS, LONG_DOC, *_frequent(*sorted(vocabulary))]
    hp = {"augmentation": "synonym", "synonym_rule": "rate", "aug_p": p}
    build = build_pairs(*context(documents, recipe="deca", max_length=10_000, **hp))
    changed, eligible = [], 0
    for seed in range(10):
        original, augmented = build(LONG_DOC, random.Random(seed))
        eligible += sum(any(s in vocabulary for s in wordnet().synonyms(w.strip("."))) for w in original.split())
        changed += [(x, y) for x, y in zip(original.split(), augmented.split()) if x != y]
    assert abs(len(changed) / eligible - p) < 0.05  # 800 eligible words: a standard deviation of 0.016
    assert all(y.strip(".").lower() in vocabulary for _, y in changed)


def test_deca_synonym_paper_rule_draws_each_word_uniformly_from_its_synonyms_and_itself():
    """DECA §3.3: the original word is in its own candidate set; every word is redrawn from the set.
    "large" has one frequent synonym here ("big"), "house" none: half the "large" stay, every "house"."""
    build = build_pairs(*context(_frequent("big", "large", "house"), recipe="deca", max_length=10_000))
    drawn = Counter()
    for seed in range(400):
        _, augmented = build(["large house"], random.Random(seed))
        drawn.update(augmented.split())
    assert drawn["house"] == 400 and set(drawn) == {"large", "big", "house"}
    assert drawn["large"] / 400 == pytest.approx(0.5, abs=0.07)  # the old rule (aug_p 0.1, self excluded): 0.9


def test_deca_rarely_seen_words_must_not_be_drawn():
    # "street" is a WordNet synonym of "road" but occurs once: the dictionary constraint drops it
    build = build_pairs(*context([*_frequent("road"), ["street"]], recipe="deca", max_length=10_000))
    assert {build(["road"], random.Random(seed))[1] for seed in range(50)} == {"road"}


def test_deca_without_the_dictionary_constraint_draws_outside_the_corpus():
    build = build_pairs(
        *context(recipe="deca", augmentation="synonym", aug_p=1.0, dictionary_constraint=False, max_length=10_000)
    )
    _, augmented = build(LONG_DOC, random.Random(0))
    vocabulary = {w.strip(".").lower() for d in CORPUS for s in d for w in s.split()}
    assert any(w.strip(".").lower() not in vocabulary for w in augmented.split())


def test_deca_antonym_negates_adjectives_and_verbs_only():
    documents = _frequent("big", "little", "good", "bad", "woman", "decrease", "increase")
    build = build_pairs(*context(documents, recipe="deca", augmentation="antonym", aug_p=1.0))
    _, augmented = build(["a big man saw good prices increase"], random.Random(0))
    assert "not little" in augmented and "not bad" in augmented  # adjectives (WordNet: big <-> little)
    assert "not decrease" in augmented  # a verb
    assert "man" in augmented.split() and "not woman" not in augmented  # a noun keeps its antonym to itself


def test_deca_antonyms_come_from_every_lemma_of_the_words_synsets_as_in_the_papers_example():
    """DECA §3.3: "... offers an exceptionally strong characterization" becomes "... offers an
    exceptionally not impotent characterization": "impotent" is the antonym of "potent", which shares
    a synset with "strong" ({potent, strong, stiff}); "strong"'s own antonym is "weak"."""
    from trainers.augment.wordnet import wordnet

    assert wordnet().antonyms("strong", "a") == ["impotent", "weak"]
    # only the word's own senses: "slight" reaches "much" through {little, slight}, not "big", the
    # antonym of "little" in another sense
    assert wordnet().antonyms("slight", "a") == ["much"]
    documents = _frequent("impotent", "weak")
    build = build_pairs(*context(documents, recipe="deca", augmentation="antonym", aug_p=1.0))
    drawn = Counter(
        build(["offers an exceptionally strong characterization"], random.Random(seed))[1] for seed in range(60)
    )
    assert set(drawn) == {
        "offers an exceptionally not impotent characterization",
        "offers an exceptionally not weak characterization",
    }


def test_deca_uninformative_replaces_rare_words_by_frequent_synonyms():
    """DECA §3.3: low-frequency words become synonyms with high frequencies."""
    documents = [*_frequent("car", "the"), ["the automobile", "an auto"]]  # "automobile" and "auto" are rare
    build = build_pairs(*context(documents, recipe="deca", augmentation="uninformative", aug_p=1.0, max_length=1000))
    _, augmented = build(["the automobile and the car"], random.Random(0))
    assert augmented == "the car and the car"  # the rare word became its frequent synonym; the rest stays
    _, unchanged = build(["the car"], random.Random(0))
    assert unchanged == "the car"


def test_deca_tfidf_uda_replacement_spares_informative_words():
    documents = [[f"the a of and to word{i}"] for i in range(15)]  # five uninformative words, drawn as replacements
    build = build_pairs(*context(documents, recipe="deca", augmentation="tfidf_uda", aug_p=0.3))
    kept = Counter()
    for seed in range(200):
        original, augmented = build(["the zebra ate the grass"], random.Random(seed))
        kept.update(x for x, y in zip(original.split(), augmented.split()) if x == y)
    # rare words survive more often than frequent ones ("the" occurs twice per document)
    assert kept["zebra"] / 200 > 0.9 and kept["the"] / 400 < 0.7


@pytest.mark.parametrize(
    ("augmentation", "check"),
    [
        ("deletion", lambda a, b: len(b.split()) < len(a.split())),
        ("swap", lambda a, b: sorted(a.split()) == sorted(b.split()) and a != b),
    ],
)
def test_deca_deletion_and_swap(augmentation, check):
    build = build_pairs(*context(recipe="deca", augmentation=augmentation, aug_p=0.2))
    original, augmented = build(LONG_DOC, random.Random(0))
    assert check(original, augmented)
    assert build(LONG_DOC, random.Random(0)) == (original, augmented)  # deterministic under a seed


@pytest.mark.parametrize(
    ("name", "message"),
    [("ppdb", "PPDB database"), ("thesaurus", "unknown augmentation")],
)
def test_unavailable_augmentations_say_what_is_missing(name, message):
    with pytest.raises(AugmentationUnavailable, match=message):
        check_augmentation(name)


# --- crops ------------------------------------------------------------------------------------


def _runs_of(view: str, words: list[str]) -> int:
    """Where ``view``'s words run contiguously in ``words`` (-1: nowhere)."""
    span = view.split()
    return next((i for i in range(len(words) - len(span) + 1) if words[i : i + len(span)] == span), -1)


@settings(max_examples=100, deadline=None)
@given(st.integers(4, 400), st.integers(16, 256), st.floats(0.05, 1.0), st.floats(0.05, 1.0), st.integers(0, 999))
def test_crops_are_two_spans_of_one_window_that_fits_each_a_share_of_it(words, max_length, low, high, seed):
    document = [f"w{i}" for i in range(words)]
    build = build_pairs(*context(max_length=max_length, views="crops", crop_min=low, crop_max=high))
    view_a, view_b = build([" ".join(document)], random.Random(seed))
    starts = [_runs_of(view, document) for view in (view_a, view_b)]
    assert -1 not in starts  # each a contiguous span of the document
    lo, hi = min(low, high), max(low, high)
    window = min(words, max_length - 2)  # a word is a token here: the window fits the view's budget
    first, last = min(starts), max(s + len(v.split()) for s, v in zip(starts, (view_a, view_b)))
    assert last - first <= window
    for view in (view_a, view_b):
        assert max(1, round(lo * window)) - 1 <= len(view.split()) <= max(1, round(hi * window)) + 1


def test_crops_differ_by_seed_and_a_short_document_gives_none():
    build = build_pairs(*context(views="crops"))
    document = [" ".join(f"w{i}" for i in range(200))]
    assert build(document, random.Random(1)) != build(document, random.Random(2))
    assert build(document, random.Random(3)) == build(document, random.Random(3))
    assert build(["three short words"], random.Random(0)) is None


# --- span to document -------------------------------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(st.integers(2, 1500), st.integers(0, 600), st.integers(1, 120), st.integers(1, 120), st.integers(0, 999))
def test_span_is_taken_past_its_start_and_the_rest_of_the_document_is_the_other_view(words, after, low, high, seed):
    document = [f"w{i}" for i in range(words)]
    hp = {"views": "span", "span_after": after, "span_min_tokens": low, "span_max_tokens": high}
    pair = build_pairs(*context(max_length=512, **hp))([" ".join(document)], random.Random(seed))
    fewest, most = min(low, high), max(low, high)
    if words < after + fewest + 1:
        assert pair is None
        return
    span, rest = pair[0].split(), pair[1].split()
    start = _runs_of(pair[0], document)
    assert start >= after and fewest <= len(span) <= most
    assert rest == document[:start] + document[start + len(span) :]  # the document, the span taken out
    if after >= 512:  # read at the trial's length, the rest never holds the span
        assert not set(rest[:512]) & set(span)


def test_span_views_come_from_pretraining_articles_and_no_held_out_text():
    """The training stream's documents are the pretraining articles; a span built from them is text of
    its own article and of no validation, development or locked test article."""
    from transformers import AutoTokenizer

    from doctune_core.data.news import held_out_articles, pretraining_articles
    from doctune_core.encoder import resolve_model

    tokenizer = AutoTokenizer.from_pretrained(resolve_model("all-minilm-l6-v2"))
    count = lambda text: len(tokenizer(text, add_special_tokens=False)["input_ids"])  # noqa: E731
    articles = pretraining_articles()[:60]
    build = build_pairs(TrialSettings(views="span"), 4096, count, [a.text.split(". ") for a in articles])
    held_out = [a.text for a in held_out_articles()]
    built = 0
    for article in articles:
        sentences = article.text.split(". ")
        pair = build(sentences, random.Random(article.article_id))
        if pair is None:
            continue
        built += 1
        assert _runs_of(pair[0], " ".join(sentences).split()) >= 0  # a run of its own article's words
        assert not any(pair[0] in text for text in held_out)
    assert built >= 10
