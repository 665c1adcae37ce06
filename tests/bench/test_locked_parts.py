"""The default tasks' test parts are locked by construction: made of items nothing has scored to
choose, no near duplicate of text trained on or validated on, and read in one recorded place only.

- The news tasks' test part is a tenth of the articles of its own, drawn out of pretraining on
  2026-12-01; the benchmark tables scored the first held-out tenth's second half (``retired``), and
  the tenth locked before it is worn (``dev``).
- R8's test part is drawn fresh out of its training split, among documents no earlier validation part
  held; the published test split (the tables' part, the worn part) is scored by nothing.
- No locked text near-duplicates pretraining, validation or development text (``doctune_core.data.duplicates``).
- Every part's scores carry a ``part_digest`` (a checksum of what the part holds): a benchmark file
  (any JSON file under ``bench/``) that holds the digest of a locked part, a test part's scores, or a
  table built after the lock (``test_part: locked``), fails here; so does any tracked file but
  ``bench/locked-part-readings.md``, where a finished search's locked-part reading is recorded, that
  holds a locked part's digest.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from dataclasses import replace
from functools import cache
from pathlib import Path

import pytest

from doctune_core.data.duplicates import near_duplicated
from doctune_core.data.news import held_out_articles, pretraining_articles
from evaluators.plan import EvalBudget
from evaluators.tasks import make_task
from evaluators.tasks.orange import earlier_validation, fresh_locked_split, read_orange_splits
from evaluators.tasks.probe import stratified_subsample, stratum
from evaluators.tasks.reuters_r8 import REUTERS_R8
from platform.spec import load_spec
from tests.conftest import ROOT

# every benchmark file: the tables (bench/data), the results (bench/results), the study's record
# (bench/study); bench/out is a scratch folder git ignores
BENCH_FILES = sorted(p for p in (ROOT / "bench").rglob("*.json") if "out" not in p.relative_to(ROOT / "bench").parts)
TABLE_SPECS = sorted(p for p in (ROOT / "bench").glob("efficiency_*.yaml"))
LONG_TASKS = ("needle-retrieval", "passkey-retrieval", "news-passage-retrieval")
READINGS = "bench/locked-part-readings.md"  # the one tracked file a locked part's digest may appear in


def _walk(value, key: str = "") -> Iterator[tuple[str, object]]:
    """Every (key, value) pair in a JSON document, at any depth."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield k, v
            yield from _walk(v, k)
    elif isinstance(value, list):
        for v in value:
            yield from _walk(v, key)


def _default_budgets() -> dict[str, EvalBudget]:
    """The budgets the default search scores at, per profile, and the long-document benchmark's."""
    budgets = {profile: load_spec("docsplit_long", profile)[0].evaluation.limits for profile in ("full", "local")}
    budgets["smoke"] = load_spec("docsplit_long", "smoke")[0].evaluation.limits
    budgets["bench"] = EvalBudget(long_length=4096)  # bench/long_document_tasks.py: the benchmark sizes
    return budgets


@cache
def _locked_digests() -> dict[float, str]:
    """The test-part digest of each default task (the default search's and the long-document ones)
    at each budget it is scored at: digest -> where it comes from."""
    tasks = [*load_spec("docsplit_long", "full")[0].search.objective.tasks, *LONG_TASKS]
    digests = {}
    for profile, budget in _default_budgets().items():
        for name in dict.fromkeys(tasks):
            task = make_task(name, budget)
            task.load()
            digests[task.part_digest("test")] = f"{name} at the {profile} budget"
    return digests


def test_the_news_test_part_is_a_held_out_slice_of_its_own():
    parts = {part: {a.article_id for a in held_out_articles(part)} for part in ("val", "retired", "dev", "test")}
    trained = {a.article_id for a in pretraining_articles()}
    assert all(len(ids) > 150 for ids in parts.values())
    assert not parts["test"] & (parts["val"] | parts["retired"] | parts["dev"] | trained)
    assert not (parts["val"] | parts["retired"] | parts["dev"]) & trained
    assert not parts["val"] & parts["retired"] and not parts["dev"] & (parts["val"] | parts["retired"])
    with pytest.raises(ValueError, match="no held-out part 'locked'"):
        held_out_articles("locked")


def test_no_locked_news_text_duplicates_pretraining_validation_or_development_text():
    locked = [a.text for a in held_out_articles("test")]
    others = [a.text for a in pretraining_articles()] + [
        a.text for p in ("val", "retired", "dev") for a in held_out_articles(p)
    ]
    assert not set(locked) & set(others)  # exact
    assert not any(near_duplicated(locked, others))  # Jaccard of 5-word shingles under 0.5


def test_no_locked_r8_text_duplicates_validation_training_or_pretraining_text_nor_an_earlier_validation_part():
    task = make_task("r8-fewshot", EvalBudget())
    task.load()
    locked, _ = task.parts["test"]
    validation, _ = task.parts["val"]
    train_x, train_y, test_x, test_y = read_orange_splits("reuters-r8")
    earlier = {train_x[i] for i in earlier_validation(REUTERS_R8, train_x, train_y, test_x, test_y)}
    rest, _, fresh, _ = fresh_locked_split(REUTERS_R8)  # the training split the task validates and fits on
    assert set(locked) <= set(fresh) and set(validation) <= set(rest)
    assert len(locked) > 900 and not set(locked) & (earlier | set(test_x))
    assert not any(near_duplicated(locked, [*rest, *test_x]))
    assert not any(near_duplicated(locked, [a.text for a in pretraining_articles()]))


def test_the_near_duplicate_rule_finds_a_lightly_edited_copy_and_not_a_text_on_the_same_subject():
    text = " ".join(f"word{i}" for i in range(200))
    edited = text.replace("word50 ", "").replace("word150", "changed")
    same_subject = " ".join(f"word{i}" for i in range(0, 400, 2))
    assert near_duplicated([text, same_subject], [edited]) == [True, False]
    assert near_duplicated([text], [text]) == [True]


def test_the_news_tasks_test_parts_are_made_of_the_locked_slice_only():
    locked = {a.text.strip() for a in held_out_articles("test")}
    earlier = {a.text.strip() for part in ("val", "retired", "dev") for a in held_out_articles(part)}
    budget = EvalBudget(max_queries=30, long_length=1024)
    title = make_task("news-title-retrieval", budget)
    title.load()
    corpus, _, _ = title.parts["test"]
    assert set(corpus.values()) <= locked
    passage = make_task("news-passage-retrieval", budget)
    passage.load()
    # the passage task's documents are articles with a passage taken out: each is within one article
    documents = list(passage.parts["test"][0].values())
    assert documents and all(not any(d[:200] in text for text in earlier) for d in documents)


@pytest.mark.parametrize("spec_path", TABLE_SPECS, ids=lambda p: p.stem)
def test_r8s_test_part_holds_no_document_a_benchmark_table_scored(spec_path: Path):
    """Each table scored R8's published test split cut to its spec's ``max_test``; that size is among
    the retired ones, and no document of that cut (nor a duplicate of one) is in the test part."""
    table_budget = load_spec(str(spec_path), "local")[0].evaluation.limits
    assert table_budget.max_test in REUTERS_R8.retired_test_sizes
    _, _, test_x, test_y = read_orange_splits("reuters-r8")
    scored = {test_x[i] for i in stratified_subsample([stratum(y) for y in test_y], table_budget.max_test)}
    for budget in [*_default_budgets().values(), replace(table_budget, max_test=None)]:
        task = make_task("r8-fewshot", budget)
        task.load()
        texts, _ = task.parts["test"]
        assert texts and not set(texts) & scored


@pytest.mark.slow  # builds every default task's test part at four budgets (about 45 s)
def test_no_benchmark_file_holds_a_score_on_a_locked_part():
    locked = _locked_digests()
    assert len(locked) >= 4 * len(_default_budgets())  # distinct digests: a digest that ignored content would collide
    for path in BENCH_FILES:
        document = json.loads(path.read_text())
        for key, value in _walk(document):
            if key == "part_digest":
                assert value not in locked, f"{path.name} holds a score on the locked test part of {locked[value]}"
            if key == "test_part":
                assert value == "retired", f"{path.name}: its test objectives are of the locked test parts"
            if key == "test" and isinstance(value, dict) and "main" in value:
                pytest.fail(f"{path.name} holds a test-part score; a benchmark scores validation (EvalPlan.parts)")
    tables = [p for p in BENCH_FILES if p.parent.name == "data"]
    assert tables and all("test_part" in json.loads(p.read_text()) for p in tables), "a table names its test part"


@pytest.mark.slow  # builds every default task's test part at four budgets (its cache shared with the test above)
def test_a_locked_parts_digest_appears_in_no_tracked_file_but_the_readings():
    locked = {str(int(digest)): where for digest, where in _locked_digests().items()}
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    assert READINGS in tracked
    numbers = re.compile(r"\d{6,}")
    for name in tracked:
        path = ROOT / name
        if name == READINGS or not path.is_file():
            continue
        try:
            found = set(numbers.findall(path.read_text(encoding="utf-8")))
        except UnicodeDecodeError:  # a binary file (a plot) holds no digest a person reads
            continue
        assert not found & set(locked), (
            f"{name} holds the digest of the locked part of {locked[(found & set(locked)).pop()]}"
        )


def test_the_digest_of_a_part_follows_what_it_holds():
    budget = EvalBudget(max_queries=20, max_test=40, long_length=512)
    task = make_task("news-title-retrieval", budget)
    task.load()
    other = make_task("news-title-retrieval", replace(budget, max_queries=21))
    other.load()
    assert task.part_digest("val") != task.part_digest("test")
    assert task.part_digest("test") != other.part_digest("test")
    again = make_task("news-title-retrieval", budget)
    again.load()
    assert again.part_digest("test") == task.part_digest("test")


# what a command runs to start a search or a study: the driver's modules, or the script that runs one
SEARCH_ENTRY_POINTS = ("platform.search", "platform.study", "search.sh")
# the benchmarks known to run searches: the check below must find each one's command
SEARCHING_BENCHMARKS = {
    "corpus_scale.py",
    "data_parallel.py",
    "efficiency_table.py",
    "scoring_overlap.py",
    "search_wall_time.py",
    "trial_start_up.py",
}


def search_commands(source: str) -> list[tuple[int, bool]]:
    """Each command a benchmark script writes (a list or tuple of arguments) that runs a search or a
    study, by line, with whether it passes ``--validation-only``; and each ``doctune.search`` call, with
    whether it passes ``validation_only=True``."""
    import ast

    def names_an_entry_point(node: ast.AST) -> bool:
        return any(
            isinstance(c, ast.Constant) and isinstance(c.value, str) and c.value.endswith(SEARCH_ENTRY_POINTS)
            for c in ast.walk(node)
        )

    commands = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.List, ast.Tuple)) and any(names_an_entry_point(e) for e in node.elts):
            flagged = any(isinstance(e, ast.Constant) and e.value == "--validation-only" for e in node.elts)
            commands.append((node.lineno, flagged))
        elif isinstance(node, ast.Call) and ast.unparse(node.func) in ("doctune.search", "search"):
            flagged = any(k.arg == "validation_only" and ast.unparse(k.value) == "True" for k in node.keywords)
            commands.append((node.lineno, flagged))
    return commands


def test_every_benchmark_that_runs_a_search_or_a_study_reads_validation_only():
    """A run made to measure something reads no locked part: every benchmark script's search runs with
    ``--validation-only`` (its own arguments), every benchmark spec (a study's, a table's) sets
    ``evaluation.locked_part: false`` under every profile."""
    scripts = sorted((ROOT / "bench").rglob("*.py"))
    found = {path.name: commands for path in scripts if (commands := search_commands(path.read_text()))}
    assert SEARCHING_BENCHMARKS <= set(found), "the check no longer sees some benchmark's search command"
    reading = [f"{name}:{line}" for name, commands in found.items() for line, flagged in commands if not flagged]
    assert not reading, f"benchmark searches that would read the locked test parts: {reading}"
    for spec in sorted((ROOT / "bench").glob("*.yaml")):
        for profile in ("full", "local", "smoke"):
            assert not load_spec(str(spec), profile)[0].evaluation.locked_part, f"{spec.name} ({profile})"
