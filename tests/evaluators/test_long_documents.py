"""Long-document tasks (needle, passkey, long passage) and scores by document length, on the
packaged held-out news text and a user's collection made of it."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest

from evaluators.lengths import BUCKET_LABELS, bucket_label, buckets, token_counts
from evaluators.plan import EvalBudget
from evaluators.tasks import UnknownTask, check_task_name, grid_task, make_task
from evaluators.tasks.base import SPLITS
from evaluators.tasks.held_out_text import part_texts, sentences
from evaluators.tasks.long_passage import MAX_PASSAGES, MIN_TOKENS, OPENING_TOKENS, SPAN_TOKENS, content_words, passages
from evaluators.tasks.needle import DEPTHS, HAYSTACK_LENGTHS, POOL_PER_QUERY, Haystack, haystack_lengths
from evaluators.tasks.needle_facts import FIRST_NAMES, NEEDLE_TEMPLATES, PASSKEY_QUESTION, SURNAMES, part_half
from tests.conftest import ROOT

SMALL = EvalBudget(max_queries=6, long_queries=6, long_length=1024)  # three lengths, two queries per cell


@pytest.fixture(scope="module")
def needle():
    task = make_task("needle-retrieval", SMALL)
    task.load()
    return task


@pytest.fixture(scope="module")
def passkey():
    task = make_task("passkey-retrieval", SMALL)
    task.load()
    return task


def test_length_buckets_are_upper_inclusive_and_cover_every_length():
    assert [bucket_label(n) for n in (1, 512, 513, 1024, 2048, 4096, 4097)] == [
        "len_upto512",
        "len_upto512",
        "len_513to1024",
        "len_513to1024",
        "len_1025to2048",
        "len_2049to4096",
        "len_over4096",
    ]
    rows = buckets([100, 600, 5000, 300])
    assert list(rows) == ["len_upto512", "len_513to1024", "len_over4096"]  # in BUCKET_LABELS order, empty left out
    assert sorted(np.concatenate(list(rows.values())).tolist()) == [0, 1, 2, 3]
    assert len(BUCKET_LABELS) == 5


def test_each_part_has_at_least_20_templates_and_the_parts_share_none():
    for facts in (NEEDLE_TEMPLATES, FIRST_NAMES, SURNAMES):
        val, test = part_half(facts, "val"), part_half(facts, "test")
        assert len(set(val)) == len(val) and len(set(test)) == len(test)
        assert not set(val) & set(test)
    assert len(part_half(NEEDLE_TEMPLATES, "val")) >= 20 and len(part_half(NEEDLE_TEMPLATES, "test")) >= 20


PERSON = re.compile(r"[A-Z][a-z]+ [A-Z][a-z]+")


def _person(question: str) -> str:
    return PERSON.search(question.removeprefix("What ")).group(0)


@pytest.mark.parametrize("fixture", ["needle", "passkey"])
def test_the_parts_plant_disjoint_facts_about_disjoint_people(fixture, request):
    task = request.getfixturevalue(fixture)
    used_templates = {}
    for split in SPLITS:
        _, queries, _ = task.parts[split]
        first, last = part_half(FIRST_NAMES, split), part_half(SURNAMES, split)
        for question in queries.values():
            assert any(f in question for f in first) and any(s in question for s in last)
        used_templates[split] = {question.replace(_person(question), "") for question in queries.values()}
    if fixture == "passkey":  # LongEmbed's one frame: only the person (and the key) tells haystacks apart
        assert used_templates["val"] == used_templates["test"] == {PASSKEY_QUESTION.format(name="")}
    else:
        assert not used_templates["val"] & used_templates["test"]
        assert len(used_templates["val"]) > 1


PASSKEY_PLANTED = re.compile(r"The pass key of (?P<name>[A-Z][a-z]+ [A-Z][a-z]+) is (?P<key>\d{5})\.")


def _planted(kind: str, haystack: str) -> tuple[str, str]:
    """(the template, the person) of the one fact planted in ``haystack``."""
    if kind == "passkey":
        (found,) = PASSKEY_PLANTED.finditer(haystack)
        return "passkey", found.group("name")
    templates = part_half(NEEDLE_TEMPLATES, "val") + part_half(NEEDLE_TEMPLATES, "test")
    (found,) = [(fact, m.group("name")) for fact, _ in templates for m in re.finditer(_pattern(fact), haystack)]
    return found


def _pattern(fact: str) -> str:
    """A needle template as a pattern that finds it planted and captures whom it is about."""
    before, after = (re.escape(piece) for piece in fact.split("{name}"))
    return before + r"(?P<name>[A-Z][a-z]+ [A-Z][a-z]+)" + after


@pytest.mark.parametrize("kind", ["needle", "passkey"])
def test_at_the_benchmark_size_a_length_ranks_50_queries_against_100_haystacks_each_about_another_person(kind):
    task = make_task(f"{kind}-retrieval", EvalBudget(long_length=512))  # the benchmark's counts, two lengths
    task.load()
    for split in SPLITS:
        corpus, _, qrels = task.parts[split]
        pools = task.pools(split)
        assert len(pools) == len(haystack_lengths(512)) == 2
        for documents, asked in pools:
            assert len(asked) == 50 and len(documents) == POOL_PER_QUERY * 50 == 100
            assert all(next(iter(qrels[q])) in documents for q in asked)
            people = [_planted(kind, corpus[d])[1] for d in documents]
            assert len(set(people)) == len(people)  # so only the person (and what is said of them) decides


@pytest.mark.parametrize("budget", [SMALL, EvalBudget(long_length=512)], ids=["small", "benchmark"])
def test_every_needle_template_is_planted_in_at_least_two_haystacks_of_a_pool(budget):
    task = make_task("needle-retrieval", budget)
    task.load()
    for split in SPLITS:
        corpus, _, _ = task.parts[split]
        for documents, _ in task.pools(split):
            planted: dict[str, int] = {}
            for d in documents:
                template = _planted("needle", corpus[d])[0]
                planted[template] = planted.get(template, 0) + 1
            assert min(planted.values()) >= 2, split


def test_filler_comes_from_its_own_parts_text_none_repeated_within_a_document():
    own = {split: {s for text in part_texts("news-articles", split) for s in sentences(text)} for split in SPLITS}
    for split in SPLITS:
        haystack = Haystack(part_texts("news-articles", split), np.random.default_rng(0))
        other = "test" if split == "val" else "val"
        for length in (512, 2048):
            units = haystack.build(length, 0.5, "A planted sentence.")
            filler = [u for u in units if u != "A planted sentence."]
            assert len(filler) == len(set(filler)) and len(filler) == len(units) - 1
            assert all(s in own[split] for s in filler)
            assert not any(s in own[other] - own[split] for s in filler)
            assert 0.9 * length <= token_counts([" ".join(units)])[0] <= length


@pytest.mark.parametrize("fixture", ["needle", "passkey"])
def test_haystacks_reach_their_length_with_the_fact_at_its_depth(fixture, request):
    task = request.getfixturevalue(fixture)
    corpus, queries, _ = task.parts["test"]
    lengths = dict(zip(corpus, token_counts(list(corpus.values()))))
    cells = task.cells["test"]
    assert sorted({n for n, _ in cells.values()}) == [256, 512, 1024]
    for q, (length, depth) in cells.items():
        doc = f"d{q[1:]}"
        assert 0.9 * length <= lengths[doc] <= length
        before = corpus[doc][: corpus[doc].index(_person(queries[q]))]
        (tokens_before,) = token_counts([before])
        assert abs((tokens_before - 2) / lengths[doc] - depth) < 0.12  # at a sentence boundary near the depth
    assert sorted(queries) == sorted(cells)
    assert {d for _, d in cells.values()} == set(DEPTHS)


def test_haystack_lengths_follow_the_scoring_length():
    assert haystack_lengths(4096) == HAYSTACK_LENGTHS == (256, 512, 1024, 2048, 4096)
    assert haystack_lengths(2048) == (256, 512, 1024, 2048)
    assert haystack_lengths(128) == (128,)  # a smoke profile's: its own length alone


def test_a_round_may_score_the_longest_haystacks_and_the_grid_variant_every_length():
    longest = make_task("needle-retrieval", EvalBudget(long_queries=6, long_length=1024, haystacks="longest"))
    longest.load()
    grid = make_task(grid_task("needle-retrieval"), longest.budget)
    grid.load()
    lengths = lambda task: sorted({n for n, _ in task.cells["val"].values()})  # noqa: E731
    assert lengths(longest) == [1024] and lengths(grid) == [256, 512, 1024]
    assert len(longest.parts["val"][1]) == 6 and len(grid.parts["val"][1]) == 18
    assert grid.metadata.name == "needle-retrieval"  # scored and described as the task it is a grid of
    with pytest.raises(UnknownTask, match="no documents of set lengths"):
        check_task_name(grid_task("r8-fewshot"))


def test_a_search_whose_rounds_score_the_longest_haystacks_reports_the_grid():
    from platform.search_path.plans import _report_tasks
    from platform.spec import load_spec

    spec = load_spec("docsplit_long", "smoke")[0]  # haystacks: longest, needle and passkey in the objective
    # its report-only task first, then the grids
    assert _report_tasks(spec) == ("20ng-topic-pairs", "needle-retrieval@grid", "passkey-retrieval@grid")
    every_length = replace(spec.evaluation.limits, haystacks="grid")
    every_round = replace(spec, evaluation=replace(spec.evaluation, limits=every_length))
    assert _report_tasks(every_round) == ("20ng-topic-pairs",)  # a round scores every length: no grid


def test_long_passages_are_taken_out_of_their_document_past_token_512_one_a_span():
    task = make_task("news-passage-retrieval", EvalBudget())
    task.load()
    originals = {split: {" ".join(sentences(t)) for t in part_texts("news-articles", split)} for split in SPLITS}
    for split in SPLITS:
        corpus, queries, qrels = task.parts[split]
        by_document: dict[str, list[str]] = {}
        for q, passage in queries.items():
            (doc,) = qrels[q]
            assert passage not in corpus[doc]  # taken out: no exact match finds it
            by_document.setdefault(doc, []).append(passage)
        for doc, taken in by_document.items():
            assert len(taken) <= MAX_PASSAGES
            # the article it came from holds every passage of it, in order, and nothing else is missing
            (whole,) = [t for t in originals[split] if _without(t, taken).split() == corpus[doc].split()]
            # where each passage starts, counted as the task counts: sentence by sentence, [CLS] first
            units = sentences(whole)
            at = np.cumsum([1, *(n - 2 for n in token_counts(units))])
            starts = [
                next(
                    int(at[i])
                    for i in range(len(units))
                    for j in range(i + 1, len(units) + 1)
                    if " ".join(units[i:j]) == p
                )
                for p in taken
            ]
            assert all(a >= MIN_TOKENS for a in starts) and starts == sorted(starts)
            spans = [(a - MIN_TOKENS) // SPAN_TOKENS for a in starts]
            assert len(set(spans)) == len(spans)  # one a span


def _without(text: str, passages: list[str]) -> str:
    for passage in passages:
        text = text.replace(passage, "") if passage in text else "\0"
    return text


def test_the_real_text_part_has_100_queries_a_third_of_them_in_documents_over_1024_tokens():
    task = make_task("news-passage-retrieval", EvalBudget())
    task.load()
    for split in SPLITS:
        _, queries, _ = task.parts[split]
        strata = task.query_strata(split, sorted(queries))
        longer = sum(len(rows) for label, rows in strata.items() if label not in ("len_upto512", "len_513to1024"))
        assert len(queries) >= 100 and longer >= len(queries) / 3, split
        assert "len_upto512" not in strata  # every document ranked is over 512 tokens


def test_a_span_gives_the_passage_that_shares_least_with_the_documents_opening():
    opening = ["The harbour strike closed the port of Rotterdam on Monday."] * 20
    while sum(n - 2 for n in token_counts(opening)) < MIN_TOKENS:  # the candidates start in the first span
        opening.append("Filler words follow here.")
    near = "Dockers at the harbour of Rotterdam said the strike would last."
    far = "Her grandmother had grown violets on a windowsill in Lyon."
    units = [*opening, near, near, near, far, far, far, *(["An end."] * 10)]
    tokens = [n - 2 for n in token_counts(units)]
    for seed in range(5):
        ((first, end),) = passages(units, tokens, np.random.default_rng(seed))
        chosen = " ".join(units[first:end])
        assert far in chosen and "harbour" not in chosen
    assert content_words(near) & content_words(" ".join(opening)) and OPENING_TOKENS >= MIN_TOKENS


def test_every_retrieval_score_is_broken_down_by_the_length_of_the_document_to_find(minilm_dir):
    from doctune_core.encoder import embed_texts, load_encoder

    model = load_encoder(minilm_dir)
    task = make_task("news-title-retrieval", EvalBudget(max_queries=40))
    task.load()
    outcomes = task.outcomes(lambda texts: embed_texts(*model, texts, pooling="mean", max_length=64), "test")
    assert len(outcomes.ids) == len(outcomes.items) == 40
    assert sum(len(rows) for rows in outcomes.strata.values()) == 40
    summary = outcomes.summary()
    for label, rows in outcomes.strata.items():
        if len(rows) == 1:  # no interval: left out
            assert label not in summary
            continue
        assert summary[f"{label}_n"] == len(rows)
        assert summary[label] == pytest.approx(float(np.mean(outcomes.items[rows])))
        assert summary[f"{label}_acc_at_1"] <= 1
    corpus, _, qrels = task.parts["test"]
    lengths = token_counts([corpus[next(iter(qrels[q]))] for q in outcomes.ids])
    assert {label: len(rows) for label, rows in outcomes.strata.items()} == {
        label: len(rows) for label, rows in buckets(lengths).items()
    }


def test_a_users_collection_gets_needle_and_passage_tasks(tmp_path):
    collection = tmp_path / "long.jsonl"
    texts = part_texts("news-articles", "val") + part_texts("news-articles", "test")
    collection.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    for name in (f"needle:{collection}", f"passkey:{collection}", f"long-passage:{collection}"):
        task = make_task(name, EvalBudget(long_queries=3, long_length=512))
        task.load()
        assert task.metadata.long_documents
        val_docs, test_docs = (set(task.parts[s][0].values()) for s in SPLITS)
        assert val_docs and test_docs and not val_docs & test_docs


def test_a_collection_too_small_for_its_haystacks_is_refused_by_name(tmp_path):
    collection = tmp_path / "short.txt"
    collection.write_text("One short sentence here.\nAnother short one there.\n" * 2)
    task = make_task(f"needle:{collection}", EvalBudget(long_queries=3, long_length=512))
    with pytest.raises(ValueError, match=r"needle:.*part: its part holds \d+ tokens"):
        task.load()


@pytest.mark.slow  # a real encoder over 24 haystacks of 512 and 1,024 tokens: about 30 s
def test_cli_prints_acc_at_1_per_length_and_depth(tmp_path):
    out = tmp_path / "scores.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "evaluators",
            "--model",
            "all-minilm-l6-v2",
            "--task",
            "needle-retrieval",
            "--long-queries",
            "6",
            "--long-length",
            "1024",
            "--json",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "needle-retrieval: scored at 512 tokens" in done.stdout  # MiniLM's 512 positions cap the 1,024
    assert re.search(r"length \\ depth\s+10%\s+50%\s+90%", done.stdout)
    assert re.search(r"^\s+1024(\s+\d\.\d{3}){3}$", done.stdout, re.M)
    scores = json.loads(out.read_text())["scores"]["needle-retrieval"]
    assert "test" not in scores  # validation unless the locked part is asked for
    val = scores["val"]
    assert val["len1024_depth10_n"] == 2 and val["len_513to1024_n"] == 6
    cells = [val[f"len{n}_depth{d}"] for n in (256, 512, 1024) for d in (10, 50, 90)]
    assert val["main"] == pytest.approx(np.mean(cells))


def test_a_collection_task_over_a_missing_or_binary_source_is_refused_before_anything_is_read(tmp_path):
    from evaluators.tasks import UnknownTask, check_task_name

    with pytest.raises(UnknownTask, match=r"task 'needle:.*nowhere.jsonl'.* neither 'news-articles'"):
        check_task_name(f"needle:{tmp_path / 'nowhere.jsonl'}")
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(UnknownTask, match="is binary, not text"):
        check_task_name(f"long-passage:{binary}")
