"""What scoring a checkpoint costs: embeddings per second of one evaluator, re-scoring through the
embedding cache, and evaluation time against the retrieval corpus size.

    .venv/bin/python bench/evaluation_cost.py [--threads 2] [--sizes 500,1000,2000,4000,8000]

The evaluator is the class the pool's actors run (``evaluators.pool.Evaluator``), here in a fresh
process of its own without Ray, scoring the embedded all-MiniLM-L6-v2 (mean pooling, 256 tokens,
batches of 32) on the default tasks at the local profile's limits. Measured:

1. a first scoring: wall time, texts embedded, embeddings per second (texts over the time spent
   inside the encoder calls) and the share of the scoring spent embedding;
2. the same checkpoint scored again by the same evaluator, then by a new evaluator over the same
   run directory (a restarted actor, a resumed search): texts embedded again (bar: none), cache
   hit rate (bar: 100%);
3. retrieval at growing corpus sizes, each in a fresh process with an empty cache: wall time of
   the scoring, split into embedding and the rest (exact top-k, the measures). The packaged
   news-title-retrieval's parts hold a few hundred documents each, so the sweep scores a
   BEIR-format collection written here: 200 title queries and the 373 articles of the first
   held-out tenth (validation and the retired half; never the locked test part), padded with
   distractors (the pretraining news articles, then 20 Newsgroups training posts) up to the size.

Prints Markdown for bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

from child import ROOT, gpus, run_child  # bench/child.py, beside this script

TASKS = ("news-title-retrieval", "r8-fewshot")
LIMITS = {"max_documents": 2000, "max_queries": 200, "max_test": 1000, "fewshot_k": 8, "repeats": 5}


def _evaluator(tasks: tuple[str, ...], limits: dict, threads: int, run_dir: str):
    from evaluators.plan import EvalBudget, EvalPlan
    from evaluators.pool import Evaluator

    plan = EvalPlan(
        objectives={"objective": dict.fromkeys(tasks, 1.0)},
        actor_names=("bench",),
        namespace="bench",
        budget=EvalBudget(**limits),
        max_length=256,
        batch_size=32,
        threads=threads,
    )
    return Evaluator(plan, run_dir)


def _timed_encoder(evaluator) -> dict:
    """Wrap the encoder calls so their time and text count are known."""
    import doctune_core.encoder as encoder

    spent = {"seconds": 0.0, "texts": 0}
    plain = encoder.embed_texts

    def timed(model, tokenizer, texts, **kwargs):
        began = time.perf_counter()
        out = plain(model, tokenizer, texts, **kwargs)
        spent["seconds"] += time.perf_counter() - began
        spent["texts"] += len(texts)
        return out

    encoder.embed_texts = timed
    return spent


def _padded_collection(directory: str, size: int) -> str:
    """news-title-retrieval's queries and documents plus distractor documents, ``size`` in all,
    written as a BEIR directory; returns the ``beir:`` task name."""
    from doctune_core.data.news import held_out_articles, pretraining_articles
    from evaluators.tasks.orange import read_orange_splits

    held_out = held_out_articles("val") + held_out_articles("retired")  # never the locked test part
    queries = held_out[: LIMITS["max_queries"]]
    distractors = [a.text for a in pretraining_articles()] + read_orange_splits("20newsgroups")[0]
    texts = [a.text for a in held_out] + distractors[: max(0, size - len(held_out))]
    root = os.path.join(directory, "collection")
    os.makedirs(os.path.join(root, "qrels"))
    with open(os.path.join(root, "corpus.jsonl"), "w", encoding="utf-8") as corpus:
        corpus.writelines(json.dumps({"_id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(texts))
    with open(os.path.join(root, "queries.jsonl"), "w", encoding="utf-8") as out:
        out.writelines(json.dumps({"_id": f"q{i}", "text": a.title}) + "\n" for i, a in enumerate(queries))
    with open(os.path.join(root, "qrels", "test.tsv"), "w", encoding="utf-8") as qrels:
        qrels.writelines(f"q{i}\td{i}\t1\n" for i in range(len(queries)))
    return f"beir:{root}"


def child(config: dict) -> dict:
    sys.path.insert(0, str(ROOT))
    from doctune_core.encoder import resolve_model

    model = resolve_model("all-minilm-l6-v2")
    run_dir = config["run_dir"]
    if config["kind"] == "rescore":
        evaluator = _evaluator(TASKS, LIMITS, config["threads"], run_dir)
        spent = _timed_encoder(evaluator)
        began = time.perf_counter()
        evaluator.score(model, "mean")
        first = {"wall": time.perf_counter() - began, **spent, "misses": evaluator.cache.misses}
        hits, misses = evaluator.cache.hits, evaluator.cache.misses
        spent.update(seconds=0.0, texts=0)
        evaluator.score(model, "mean")
        again = {
            "texts": spent["texts"],
            "hits": evaluator.cache.hits - hits,
            "misses": evaluator.cache.misses - misses,
        }
        restarted = _evaluator(TASKS, LIMITS, config["threads"], run_dir)
        spent.update(seconds=0.0, texts=0)
        restarted.score(model, "mean")
        fresh = {"texts": spent["texts"], "hits": restarted.cache.hits, "misses": restarted.cache.misses}
        return {"first": first, "again": again, "restarted": fresh}
    task = _padded_collection(run_dir, config["size"])
    evaluator = _evaluator((task,), LIMITS | {"max_documents": config["size"]}, config["threads"], run_dir)
    spent = _timed_encoder(evaluator)
    began = time.perf_counter()
    scores = evaluator.score(model, "mean")[task]["test"]  # the validation half of the queries is scored too
    return {
        "wall": time.perf_counter() - began,
        **spent,
        "documents": scores["documents"],
        "queries": scores["queries"],
        "ndcg": scores["main"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--sizes", default="373,1000,2000,4000,8000")
    parser.add_argument("--child")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return
    began = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        rescore = run_child(__file__, {"kind": "rescore", "threads": args.threads, "run_dir": tmp})
    sizes = []
    for size in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            sizes.append(run_child(__file__, {"kind": "size", "size": size, "threads": args.threads, "run_dir": tmp}))

    import torch

    import platform

    first = rescore["first"]
    print("## Evaluation cost (`bench/evaluation_cost.py`)\n")
    print(
        f"- machine: {os.cpu_count()} CPUs, {platform.machine()}, {gpus()}; Python {platform.python_version()}, "
        f"torch {torch.__version__}, {args.threads} threads; {time.strftime('%Y-%m-%d')}; "
        f"benchmark wall time {time.perf_counter() - began:.0f} s"
    )
    print(f"- model: all-MiniLM-L6-v2, mean pooling, 256 tokens, batches of 32; tasks {', '.join(TASKS)}; {LIMITS}\n")
    print(
        f"First scoring: {first['wall']:.1f} s, {first['texts']} texts embedded in {first['seconds']:.1f} s: "
        f"**{first['texts'] / first['seconds']:.0f} embeddings/s**; embedding is "
        f"{first['seconds'] / first['wall']:.0%} of the scoring.\n"
    )
    print("| re-scoring the same checkpoint | texts embedded | cache hits | cache misses | hit rate |")
    print("|---|---|---|---|---|")
    for label, key in (("same evaluator", "again"), ("new evaluator, same run dir", "restarted")):
        r = rescore[key]
        rate = r["hits"] / max(1, r["hits"] + r["misses"])
        print(f"| {label} | {r['texts']} | {r['hits']} | {r['misses']} | {rate:.0%} |")
    print("\nRetrieval against corpus size (news titles among padded documents; fresh process and cache each):\n")
    print("| documents | queries | scoring (s) | embedding (s) | the rest (s) | embeddings/s | nDCG@10 |")
    print("|---|---|---|---|---|---|---|")
    for r in sizes:
        print(
            f"| {r['documents']:.0f} | {r['queries']:.0f} | {r['wall']:.1f} | {r['seconds']:.1f} | "
            f"{r['wall'] - r['seconds']:.2f} | {r['texts'] / r['seconds']:.0f} | {r['ndcg']:.3f} |"
        )


if __name__ == "__main__":
    main()
