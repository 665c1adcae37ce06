"""Ranking metrics, computed by trec_eval (through ``pytrec_eval``) with BEIR's conventions.

Runs are ``{query_id: {doc_id: score}}``, judgments ``{query_id: {doc_id: relevance}}``. As in
BEIR: only queries with at least one relevant document are evaluated (a judged query missing
from the run scores 0); nDCG@10 is trec_eval's ``ndcg_cut_10`` (linear gains), MAP@100 its
``map_cut_100``, Recall@100 its ``recall_100``; MRR@10 is the reciprocal rank of the first
relevant document in the top 10; acc@1 (LongEmbed's main score for its synthetic tasks) whether the
first document ranked is relevant. trec_eval ranks by descending score and breaks ties by
descending document id; the MRR cut-off uses the same order.
"""

from __future__ import annotations

import numpy as np

MEASURES = {"ndcg_at_10": "ndcg_cut_10", "map_at_100": "map_cut_100", "recall_at_100": "recall_100"}


def ranked(run: dict[str, float]) -> list[str]:
    """Document ids in trec_eval's order: descending score, ties by descending id."""
    return [doc for doc, _ in sorted(run.items(), key=lambda item: (item[1], item[0]), reverse=True)]


def ranking_table(runs: dict[str, dict[str, float]], qrels: dict[str, dict[str, int]]) -> dict[str, np.ndarray]:
    """nDCG@10, MAP@100, Recall@100, MRR@10 and acc@1 of each judged query (in sorted id order; a judged
    query missing from the run scores 0): the per-query values behind the means, which the noise
    estimates resample."""
    import pytrec_eval

    judged = {q: {d: int(r) for d, r in rel.items()} for q, rel in qrels.items() if any(r > 0 for r in rel.values())}
    if not judged:
        raise ValueError("no query has a relevant document")
    # a query with an empty run would be dropped by trec_eval rather than scored 0
    runs = {q: {d: float(s) for d, s in runs[q].items()} for q in judged if runs.get(q)}
    per_query = pytrec_eval.RelevanceEvaluator(judged, {"ndcg_cut.10", "map_cut.100", "recall.100"}).evaluate(runs)
    top10 = {q: {d: runs[q][d] for d in ranked(run)[:10]} for q, run in runs.items()}
    reciprocal = pytrec_eval.RelevanceEvaluator(judged, {"recip_rank"}).evaluate(top10)
    order = sorted(judged)

    def column(table: dict[str, dict[str, float]], measure: str) -> np.ndarray:
        return np.array([table.get(q, {}).get(measure, 0.0) for q in order])

    table = {name: column(per_query, measure) for name, measure in MEASURES.items()}
    table["mrr_at_10"] = column(reciprocal, "recip_rank")
    table["acc_at_1"] = (table["mrr_at_10"] == 1.0).astype(float)  # the first document ranked is relevant
    return table


def ranking_scores(runs: dict[str, dict[str, float]], qrels: dict[str, dict[str, int]]) -> dict[str, float]:
    """Mean nDCG@10, MAP@100, Recall@100 and MRR@10 over the judged queries."""
    return {name: float(np.mean(values)) for name, values in ranking_table(runs, qrels).items()}
