"""Retrieval scoring of the embedded encoder on real collections."""

from __future__ import annotations

import numpy as np
import pytest

from doctune_core.encoder import embed_texts, load_encoder
from evaluators.plan import EvalBudget
from evaluators.tasks import make_task
from tests.conftest import shared_collection

# all-MiniLM-L6-v2, mean pooling, 128 tokens, title + " " + text, on the first 40 judged queries
# of Cranfield's test half (its judged queries are halved, seeded, into validation and test) and
# 400 documents (recorded; the whole collection's 0.3819 is in docs/decisions/task-scoring.md).
CRANFIELD_SUBSET_NDCG10 = 0.6049


@pytest.fixture(scope="module")
def minilm(minilm_dir):
    return load_encoder(minilm_dir)


@pytest.fixture(scope="module")
def minilm_embedder(minilm):
    return lambda texts: embed_texts(*minilm, texts, pooling="mean", max_length=128)


@pytest.mark.slow  # a real collection on a real encoder: about 30 s
def test_minilm_scores_a_cranfield_subset_as_recorded(minilm_embedder):
    task = make_task(f"beir:{shared_collection('cranfield')}", EvalBudget(max_queries=40, max_documents=400))
    task.load()
    corpus, queries, _ = task.parts["test"]
    assert len(queries) == 40 and len(corpus) == 400
    scores = task.evaluate(minilm_embedder)["test"]
    assert scores["ndcg_at_10"] == pytest.approx(CRANFIELD_SUBSET_NDCG10, abs=2e-3)
    assert 0 < scores["recall_at_100"] <= 1 and scores["main"] == scores["ndcg_at_10"]
    assert 0 < scores["main_se"] < 0.1  # a bootstrap over the 40 queries


def test_a_random_encoder_scores_far_lower(minilm_embedder):
    task = make_task(f"beir:{shared_collection('cranfield')}", EvalBudget(max_queries=40, max_documents=400))
    task.load()
    rng = np.random.default_rng(0)
    random_scores = task.evaluate(lambda texts: rng.normal(size=(len(texts), 16)).astype(np.float32))
    assert random_scores["test"]["ndcg_at_10"] < 0.5 * CRANFIELD_SUBSET_NDCG10


def test_news_title_retrieval_uses_only_held_out_articles(minilm_embedder):
    from doctune_core.data.news import pretraining_articles

    task = make_task("news-title-retrieval", EvalBudget(max_queries=20, max_documents=40))
    task.load()
    trained = {a.text for a in pretraining_articles()}
    val, test = task.parts["val"], task.parts["test"]
    assert len(test[0]) == 40 and not trained & set(test[0].values()) and not trained & set(val[0].values())
    # validation and test search their own articles: no query, text or title is in both
    assert not set(val[0].values()) & set(test[0].values()) and not set(val[1].values()) & set(test[1].values())
    scores = task.evaluate(minilm_embedder)
    assert scores["test"]["ndcg_at_10"] > 0.8 and scores["val"]["ndcg_at_10"] > 0.8  # titles find their articles


def _write_collection(collection, directory, hub_layout: bool, dev=None) -> None:
    """A ``(corpus, queries, qrels)`` collection as a BEIR directory, or as a local copy of a Hub
    BEIR dataset (``<dir>`` with configs corpus / queries, judgments in ``<dir>-qrels``); with
    ``dev`` judgments too."""
    import json

    corpus, queries, qrels = collection
    directory.mkdir()
    with (directory / "corpus.jsonl").open("w") as handle:
        handle.writelines(json.dumps({"_id": d, "title": "", "text": t}) + "\n" for d, t in corpus.items())
    with (directory / "queries.jsonl").open("w") as handle:
        handle.writelines(json.dumps({"_id": q, "text": t}) + "\n" for q, t in queries.items())
    folder = directory.parent / f"{directory.name}-qrels" if hub_layout else directory / "qrels"
    folder.mkdir()
    for split, judged in (("test", qrels), ("dev", dev or {})):
        if judged:
            rows = [f"{q}\t{d}\t{r}" for q, docs in judged.items() for d, r in docs.items()]
            (folder / f"{split}.tsv").write_text("\n".join(["query-id\tcorpus-id\tscore", *rows]) + "\n")
    if hub_layout:
        configs = "".join(
            f"- config_name: {name}\n  data_files:\n  - split: {name}\n    path: {name}.jsonl\n"
            for name in ("corpus", "queries")
        )
        (directory / "README.md").write_text(f"---\nconfigs:\n{configs}---\n")


def test_a_hub_beir_dataset_scores_as_the_same_collection_on_disk(minilm_embedder, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf-cache"))
    news = make_task("news-title-retrieval", EvalBudget(max_queries=16, max_documents=30))
    news.load()
    _write_collection(news.parts["test"], tmp_path / "local", hub_layout=False)
    _write_collection(news.parts["test"], tmp_path / "hub-copy", hub_layout=True)
    scores = []
    for name in (f"beir:{tmp_path / 'local'}", f"beir-hf:{tmp_path / 'hub-copy'}"):
        task = make_task(name, EvalBudget())
        task.load()
        # no dev judgments: the 16 judged queries are halved into validation and test, over one corpus
        (_, val_queries, _), (corpus, queries, _) = task.parts["val"], task.parts["test"]
        assert (len(val_queries), len(queries), len(corpus)) == (8, 8, 30) and not set(val_queries) & set(queries)
        scores.append(task.evaluate(minilm_embedder))
    assert scores[0] == scores[1] and scores[0]["test"]["ndcg_at_10"] > 0.8


@pytest.mark.parametrize("hub_layout", [False, True])
def test_a_collection_with_dev_judgments_validates_on_them(tmp_path, monkeypatch, hub_layout):
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf-cache"))
    news = make_task("news-title-retrieval", EvalBudget(max_queries=10, max_documents=20))
    news.load()
    corpus, queries, qrels = news.parts["test"]
    dev_ids = sorted(qrels)[:4]
    test = {q: r for q, r in qrels.items() if q not in dev_ids}
    _write_collection((corpus, queries, test), tmp_path / "c", hub_layout, dev={q: qrels[q] for q in dev_ids})
    if hub_layout:  # the Hub layout names its splits in the qrels repository's card
        files = "".join(f"  - split: {s}\n    path: {s}.tsv\n" for s in ("test", "dev"))
        card = f"---\nconfigs:\n- config_name: default\n  data_files:\n{files}---\n"
        (tmp_path / "c-qrels" / "README.md").write_text(card)
    task = make_task(f"{'beir-hf' if hub_layout else 'beir'}:{tmp_path / 'c'}", EvalBudget())
    task.load()
    assert sorted(task.parts["val"][2]) == dev_ids and sorted(task.parts["test"][2]) == sorted(test)


def test_query_split_halves_the_judged_queries_disjointly_and_reproducibly():
    from evaluators.tasks.retrieval import split_queries

    qrels = {f"q{i}": {"d": int(i % 5 != 0)} for i in range(41)}  # every fifth query has no relevant document
    val, test = split_queries(qrels)
    judged = {q for q, r in qrels.items() if r["d"]}
    assert val | test == judged and not val & test and abs(len(val) - len(test)) <= 1
    assert split_queries(qrels) == (val, test)


def test_blocked_numpy_and_faiss_top_k_agree(monkeypatch):
    from evaluators.tasks import retrieval

    rng = np.random.default_rng(0)
    docs = rng.normal(size=(3000, 32)).astype(np.float32)
    queries = rng.normal(size=(40, 32)).astype(np.float32)
    docs /= np.linalg.norm(docs, axis=1, keepdims=True)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    full = queries @ docs.T
    monkeypatch.setattr(retrieval, "QUERY_BLOCK", 7)  # blocks that do not divide the queries
    blocked = retrieval.top_k(queries, docs, 10)
    monkeypatch.setattr(retrieval, "FAISS_MIN_DOCUMENTS", 1000)
    import faiss  # faiss-cpu is in the test extra

    built = []  # faiss's index is what searches, not numpy under faiss's name

    def index_flat_ip(dim: int):
        built.append(dim)
        return real_index(dim)

    real_index = faiss.IndexFlatIP
    monkeypatch.setattr(faiss, "IndexFlatIP", index_flat_ip)
    searched = retrieval.top_k(queries, docs, 10)
    assert built == [32]
    for i, (mine, theirs) in enumerate(zip(blocked, searched)):
        expected = np.argsort(-full[i])[:10]
        assert {j for j, _ in mine} == {j for j, _ in theirs} == set(expected.tolist())
        assert dict(theirs) == pytest.approx({j: float(full[i, j]) for j in expected}, abs=1e-5)


def test_a_collection_too_small_for_two_parts_is_refused_with_the_reason(tmp_path):
    news = make_task("news-title-retrieval", EvalBudget(max_queries=1, max_documents=5))
    news.load()
    _write_collection(news.parts["test"], tmp_path / "one", hub_layout=False)
    task = make_task(f"beir:{tmp_path / 'one'}", EvalBudget())
    with pytest.raises(ValueError, match="its val part has no judged query"):
        task.load()


def test_a_base_encoder_is_embedded_within_its_own_positions(tmp_path):
    from transformers import BertConfig, LongformerConfig, RobertaConfig

    from doctune_core.encoder import embedding_length

    for name, config, expected in (
        ("bert", BertConfig(max_position_embeddings=512), 512),
        ("roberta", RobertaConfig(max_position_embeddings=514, pad_token_id=1), 512),  # numbered from pad + 1
        ("longformer", LongformerConfig(max_position_embeddings=4098), 4096),  # its own length
    ):
        config.save_pretrained(tmp_path / name)
        assert embedding_length(str(tmp_path / name), 4096) == expected
        assert embedding_length(str(tmp_path / name), 256) == 256


def test_without_faiss_exact_search_falls_back_to_numpy_and_says_so_once(monkeypatch, capsys):
    import sys

    from evaluators.tasks import retrieval

    monkeypatch.setattr(retrieval, "FAISS_MIN_DOCUMENTS", 10)
    monkeypatch.setattr(retrieval, "_FALLBACK_SAID", False)
    monkeypatch.setitem(sys.modules, "faiss", None)  # what an environment without faiss gives: ImportError
    assert retrieval.search_backend(5) == "numpy" and capsys.readouterr().out == ""  # small: numpy by choice
    assert retrieval.search_backend(50) == retrieval.search_backend(60) == "numpy"
    assert capsys.readouterr().out.count("faiss is not importable") == 1


def test_a_collection_scored_under_a_budget_says_how_much_of_it_was_scored(tmp_path):
    """Every part's scores carry what was scored against the collection's totals; a retrieval
    score on a cut corpus is marked as not comparable with one on the whole collection."""
    from evaluators.leaderboard import LeaderboardRow
    from evaluators.scores import coverage, subsampled
    from platform.results.text import coverage_lines

    news = make_task("news-title-retrieval", EvalBudget(max_queries=30, max_documents=60))
    news.load()
    _write_collection(news.parts["test"], tmp_path / "c", hub_layout=False)  # 60 documents, 30 judged queries
    name = f"beir:{tmp_path / 'c'}"
    rng = np.random.default_rng(0)
    embed = lambda texts: rng.normal(size=(len(texts), 8)).astype(np.float32)  # noqa: E731
    cut = make_task(name, EvalBudget(max_documents=20, max_queries=10))
    cut.load()
    scores = cut.evaluate(embed)
    for split in ("val", "test"):  # the 30 judged queries halve into 15 and 15; each part keeps 10
        assert coverage(scores[split]).startswith("20 of 60 documents, 10 of 15 queries")
        assert subsampled(scores[split]) and "not comparable with scores on the full collection" in coverage(
            scores[split]
        )
    whole = make_task(name, EvalBudget())
    whole.load()
    full = whole.evaluate(embed)
    assert coverage(full["test"]) == "60 of 60 documents, 15 of 15 queries" and not subsampled(full["test"])
    row = LeaderboardRow("baseline", "base model, untouched", 0.1, 0, "m", {}, {name: {**scores, "split": "halves"}})
    assert coverage_lines([row], [name]) == [f"{name}: val {coverage(scores['val'])}; test {coverage(scores['test'])}"]


def test_parts_too_small_to_rank_are_warned_of_and_large_enough_ones_are_not(tmp_path):
    """A user's 30-query collection at a budget of 200 queries and 400 R8 documents: 15 queries a part,
    below what it takes to tell two typical trials apart; the packaged news titles (about 185 a part
    and more) are not. R8's 400 documents a part are below the about 700 that the default search's
    measured R8 differences need (bench/RESULTS.md, "Scoring parts sized to decide"), and the search says so."""
    from evaluators.part_sizes import references, small_parts

    limits = EvalBudget(max_queries=200, max_test=400, repeats=10)
    news = make_task("news-title-retrieval", EvalBudget(max_queries=30, max_documents=60))
    news.load()
    _write_collection(news.parts["test"], tmp_path / "c", hub_layout=False)  # 30 judged queries
    counts = {}
    for name in (f"beir:{tmp_path / 'c'}", "news-title-retrieval", "r8-fewshot"):
        task = make_task(name, limits)
        task.load()
        counts[name] = (task.metadata.type, {split: task.item_count(split) for split in ("val", "test")})
    assert counts[f"beir:{tmp_path / 'c'}"][1] == {"val": 15, "test": 15}
    warning = small_parts(counts)  # one warning, a table with a row per task too small
    header, *rows = warning.splitlines()[1:]
    assert header.split() == ["task", "items", "per", "part", "needed", "per", "part", "(measured", "on)"]
    assert [row.split()[0] for row in rows] == [f"beir:{tmp_path / 'c'}", "r8-fewshot"]
    assert "val 15, test 15 queries" in rows[0] and f"about {references()['retrieval'][1].min_items} (" in rows[0]
    assert "too small to rank trials" in warning and "--profile full" in warning
    assert small_parts({"news-title-retrieval": counts["news-title-retrieval"]}) is None
