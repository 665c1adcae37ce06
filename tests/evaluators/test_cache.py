from __future__ import annotations

import numpy as np

from evaluators.cache import EmbeddingCache, weights_digest


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


def test_weights_digest_follows_the_weights_not_the_path(tmp_path):
    for name in ("one", "two"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "model.safetensors").write_bytes(b"same weights")
    assert weights_digest(str(tmp_path / "one")) == weights_digest(str(tmp_path / "two"))
    (tmp_path / "two" / "model.safetensors").write_bytes(b"other weights")
    assert weights_digest(str(tmp_path / "one")) != weights_digest(str(tmp_path / "two"))
