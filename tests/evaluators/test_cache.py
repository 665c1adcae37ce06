from __future__ import annotations

import numpy as np

from doctune_core.encoder import weights_digest
from evaluators.cache import EmbeddingCache


def _counting_embedder(calls: list[list[str]]):
    def embed(texts: list[str]) -> np.ndarray:
        calls.append(list(texts))
        return np.array([[len(t), t.count("a")] for t in texts], dtype=np.float32)

    return embed


def test_nothing_is_embedded_twice_across_calls_and_processes(tmp_path):
    calls: list[list[str]] = []
    cache = EmbeddingCache(tmp_path)
    first = cache.embed("model-a", ["aa", "b", "aa"], _counting_embedder(calls))
    assert calls == [["aa", "b"]] and first.shape == (3, 2) and np.array_equal(first[0], first[2])
    again = cache.embed("model-a", ["b", "c"], _counting_embedder(calls))
    assert calls[-1] == ["c"] and again[0].tolist() == [1.0, 0.0]
    cache.save("model-a")
    reopened = EmbeddingCache(tmp_path)  # what a restarted evaluator sees
    reopened.embed("model-a", ["aa", "b", "c"], _counting_embedder(calls))
    assert len(calls) == 2 and reopened.misses == 0 and reopened.hits == 3
    reopened.embed("model-b", ["aa"], _counting_embedder(calls))  # other weights, other entries
    assert calls[-1] == ["aa"]


def test_caches_saving_the_same_entry_at_once_leave_a_whole_file(tmp_path):
    """Evaluators of two searches (or of the suite's two lanes) share the cache of the base model's
    embeddings and may save one entry at the same moment: each writes a file of its own and the last
    rename wins, so the entry is always one whole save."""
    from concurrent.futures import ThreadPoolExecutor

    texts = [f"document {i} " * 50 for i in range(400)]  # a save big enough to overlap another

    def save_once(_: int) -> None:
        cache = EmbeddingCache(tmp_path)
        cache.embed("model-a", texts, _counting_embedder([]))
        cache.save("model-a")

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(save_once, range(32)))  # raises what any save raised
    reopened = EmbeddingCache(tmp_path)
    reopened.embed("model-a", texts, _counting_embedder([]))
    assert reopened.hits == len(texts) and reopened.misses == 0
    assert [p.name for p in tmp_path.iterdir()] == ["model-a.npz"]  # no temporary file left


def test_weights_digest_follows_the_weights_not_the_path(tmp_path):
    for name in ("one", "two"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "model.safetensors").write_bytes(b"same weights")
    assert weights_digest(str(tmp_path / "one")) == weights_digest(str(tmp_path / "two"))
    (tmp_path / "two" / "model.safetensors").write_bytes(b"other weights")
    assert weights_digest(str(tmp_path / "one")) != weights_digest(str(tmp_path / "two"))


def test_memory_holds_a_bounded_number_of_tables_and_disk_the_rest(tmp_path):
    from evaluators.cache import MEMORY_TABLES

    calls: list[list[str]] = []
    cache = EmbeddingCache(tmp_path)
    for checkpoint in range(5 * MEMORY_TABLES):  # a long search: one table per scored checkpoint
        cache.embed(f"model-{checkpoint}", ["aa", "b"], _counting_embedder(calls))
        cache.save(f"model-{checkpoint}")
        assert len(cache._tables) <= MEMORY_TABLES
    assert len(calls) == 5 * MEMORY_TABLES
    cache.embed("model-0", ["aa", "b"], _counting_embedder(calls))  # evicted long ago: read back from disk
    assert len(calls) == 5 * MEMORY_TABLES and cache.misses == 2 * 5 * MEMORY_TABLES


def _news_titles_plan(**changes):
    """A plan scoring the news titles on a few items, as an evaluator actor would."""
    from evaluators.plan import EvalBudget, EvalPlan

    return EvalPlan(
        objectives={"objective": {"news-title-retrieval": 1.0}},
        actor_names=(),
        namespace="",
        budget=EvalBudget(max_queries=4, max_documents=8),
        max_length=128,
        batch_size=8,
        threads=1,
        **changes,
    )


def test_two_longformers_with_the_same_weights_and_other_windows_get_their_own_entries(minilm_dir, tmp_path):
    """Converted from one encoder at two attention windows: identical weights, other embeddings."""
    from doctune_core.longformer import convert_to_longformer
    from evaluators.cache import embedding_digest
    from evaluators.pool import Evaluator

    narrow = convert_to_longformer(minilm_dir, str(tmp_path / "w16"), 128, 16)
    wide = convert_to_longformer(minilm_dir, str(tmp_path / "w64"), 128, 64)
    assert weights_digest(str(narrow)) == weights_digest(str(wide))
    assert embedding_digest(str(narrow)) != embedding_digest(str(wide))
    evaluator = Evaluator(_news_titles_plan(), str(tmp_path / "run"))
    scores = [evaluator.score(str(model), "mean")["news-title-retrieval"]["test"] for model in (narrow, wide)]
    assert len(list((tmp_path / "run" / "embeddings").glob("*.npz"))) == 2  # one entry each, no false hit
    assert evaluator.cache.hits == 0 and all(0 <= s["main"] <= 1 for s in scores)


def test_bf16_embeddings_are_kept_apart_from_fp32_ones_where_the_cpu_computes_bf16(minilm_dir, tmp_path):
    """``evaluation.bf16``: a run embedding in bf16 never reads another's fp32 vectors (a run compares
    rows embedded alike); on a CPU without bf16 instructions both are fp32, one entry."""
    from doctune_core.encoder import cpu_computes_bf16
    from evaluators.pool import Evaluator

    run = str(tmp_path / "run")
    fp32 = Evaluator(_news_titles_plan(), run).score(minilm_dir, "mean")["news-title-retrieval"]["test"]
    in_bf16 = Evaluator(_news_titles_plan(bf16=True), run)
    bf16 = in_bf16.score(minilm_dir, "mean")["news-title-retrieval"]["test"]
    entries = len(list((tmp_path / "run" / "embeddings").glob("*.npz")))
    assert (entries, in_bf16.cache.hits == 0) == ((2, True) if cpu_computes_bf16() else (1, False))
    assert abs(bf16["main"] - fp32["main"]) <= 0.1  # 4 queries: one rank swap moves nDCG@10 that far


def test_a_base_outside_the_run_is_embedded_once_for_every_run_and_a_checkpoint_in_its_own_run(minilm_dir, tmp_path):
    """``EvalPlan.shared_embeddings``: the base a search starts from (outside its run directory)
    is embedded once for all runs; a checkpoint inside a run keeps its embeddings in that run."""
    import shutil

    from evaluators.pool import Evaluator

    shared = tmp_path / "shared"
    plan = _news_titles_plan(shared_embeddings=str(shared))
    first = Evaluator(plan, str(tmp_path / "run-1"))
    scores = first.score(minilm_dir, "mean")
    assert len(list(shared.glob("*.npz"))) == 1 and not (tmp_path / "run-1" / "embeddings").exists()
    second = Evaluator(plan, str(tmp_path / "run-2"))
    assert second.score(minilm_dir, "mean") == scores  # the same scores, nothing embedded again
    assert second.shared_cache.misses == 0 and second.shared_cache.hits > 0
    checkpoint = shutil.copytree(minilm_dir, tmp_path / "run-2" / "trials" / "t" / "step_000002")
    second.score(str(checkpoint), "mean")
    assert len(list((tmp_path / "run-2" / "embeddings").glob("*.npz"))) == 1  # the run's own


def test_a_checkpoint_sent_as_files_scores_as_its_directory_with_the_runs_cache_and_leaves_nothing(
    minilm_dir, tmp_path
):
    """A trial on another node sends the files of a round staged on its node, under the path its
    report will persist it to (``doctune_core.model_files``): the evaluator never reads the staged
    directory, scores what it would score, keeps the embeddings in the run's cache (the checkpoint
    is the run's) and removes its copy afterwards."""
    import shutil

    from doctune_core.model_files import ModelFiles
    from evaluators.pool import Evaluator

    run = tmp_path / "run"
    staged = shutil.copytree(minilm_dir, tmp_path / "trial-node" / "staged" / "step_000002")
    files = ModelFiles.read(staged, name=str(run / "trials" / "t" / "checkpoints" / "step_000002"))
    shutil.rmtree(tmp_path / "trial-node")  # what the evaluator's node sees of the trial's node
    evaluator = Evaluator(_news_titles_plan(shared_embeddings=str(tmp_path / "shared")), str(run))
    sent = evaluator.score(files, "mean")
    assert len(list((run / "embeddings").glob("*.npz"))) == 1 and not (tmp_path / "shared").exists()
    assert list(evaluator._models.iterdir()) == []  # the copy went with the call
    by_path = Evaluator(_news_titles_plan(), str(tmp_path / "other-run")).score(minilm_dir, "mean")
    assert sent == by_path
