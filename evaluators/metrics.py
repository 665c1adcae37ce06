"""Ranking metrics with BEIR / trec_eval conventions.

Runs are ``{query_id: {doc_id: score}}``, judgments ``{query_id: {doc_id: relevance}}``.
Only queries with at least one judgment are evaluated; documents are ranked by descending
score (ties broken by document id, descending, as trec_eval does); gains are linear in the
relevance grade (trec_eval's ``ndcg_cut``).
"""

from __future__ import annotations

import math


def _ranked(run: dict[str, float]) -> list[str]:
    # descending score; trec_eval breaks ties by document id, also descending
    return [doc for doc, _ in sorted(run.items(), key=lambda item: (item[1], item[0]), reverse=True)]


def ndcg_at_k(run: dict[str, float], judged: dict[str, int], k: int) -> float:
    ranked = _ranked(run)[:k]
    dcg = sum(judged.get(doc, 0) / math.log2(i + 2) for i, doc in enumerate(ranked) if judged.get(doc, 0) > 0)
    ideal = sorted((r for r in judged.values() if r > 0), reverse=True)[:k]
    idcg = sum(r / math.log2(i + 2) for i, r in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def recall_at_k(run: dict[str, float], judged: dict[str, int], k: int) -> float:
    relevant = {d for d, r in judged.items() if r > 0}
    if not relevant:
        return 0.0
    return len(relevant & set(_ranked(run)[:k])) / len(relevant)


def mrr_at_k(run: dict[str, float], judged: dict[str, int], k: int) -> float:
    for i, doc in enumerate(_ranked(run)[:k]):
        if judged.get(doc, 0) > 0:
            return 1.0 / (i + 1)
    return 0.0


def mean_over_queries(metric, runs: dict[str, dict[str, float]], qrels: dict[str, dict[str, int]], k: int) -> float:
    judged_queries = [q for q in qrels if any(r > 0 for r in qrels[q].values())]
    if not judged_queries:
        raise ValueError("no query has a relevant document")
    return sum(metric(runs.get(q, {}), qrels[q], k) for q in judged_queries) / len(judged_queries)
