"""``python -m evaluators --model DIR_OR_ID --task NAME [--task NAME ...] [--beir DIR ...] [--json OUT]``

Scores any encoder (a search's winner, a base model, any Hugging Face model) on doctune's tasks,
through the same ``Evaluator`` class the search's actors run, and prints a table. ``--list``
shows the tasks. Exit codes: 0 success, 2 bad input (unknown task, missing model), 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from evaluators.plan import EvalBudget, EvalPlan
from evaluators.scores import TOTAL_SUFFIX, coverage, sizes
from evaluators.tasks import TASK_FAMILIES, TASKS, UnknownTask, check_task_name


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m evaluators", description=__doc__.split("\n\n")[1])
    parser.add_argument("--model", help="model directory, packaged alias (all-minilm-l6-v2) or Hugging Face id")
    parser.add_argument("--task", action="append", default=[], help="a task name (repeatable); see --list")
    parser.add_argument("--beir", action="append", default=[], help="a BEIR-format directory to score (repeatable)")
    parser.add_argument(
        "--pooling", choices=("cls", "mean", "max"), help="default: the model's doctune.json, else mean"
    )
    parser.add_argument("--max-length", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--max-documents", type=int, help="retrieval corpus limit")
    parser.add_argument("--max-queries", type=int, help="retrieval queries (and length-robustness pairs) limit")
    parser.add_argument("--max-test", type=int, help="probe / clustering test examples (and test pairs) limit")
    parser.add_argument("--max-train", type=int, help="full-probe training examples (and training pairs) limit")
    parser.add_argument("--probe-head", choices=("logistic", "mlp"), default="logistic", help="probe classifier")
    parser.add_argument("--fewshot-k", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cache-dir", type=Path, help="embedding cache (default: a temporary directory)")
    parser.add_argument("--json", type=Path, help="also write the scores here")
    parser.add_argument("--list", action="store_true", help="list the tasks and exit")
    return parser.parse_args(argv)


def _pooling(model_dir: str, requested: str | None) -> str:
    record = Path(model_dir) / "doctune.json"
    if requested:
        return requested
    if record.exists():
        return json.loads(record.read_text()).get("pooling", "mean")
    return "mean"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.list:
        rows = [(name, TASKS[name].metadata) for name in TASKS]
        for name, meta in rows:
            print(f"{name:24s} {meta.type:10s} main: {meta.main_score:16s} {meta.long_inputs:9s} {meta.description}")
            print(f"{'':24s} parts: {meta.split}")
        for prefix in TASK_FAMILIES:
            print(f"{prefix + '<location>':24s} {(TASK_FAMILIES[prefix].__doc__ or '').strip().splitlines()[0]}")
        return 0
    tasks = [*args.task, *(f"beir:{d}" for d in args.beir)]
    try:
        if not args.model or not tasks:
            raise UnknownTask("name a --model and at least one --task or --beir (see --list)")
        for task in tasks:
            check_task_name(task)
        from core.encoder import ModelUnavailable, resolve_model

        try:
            model_dir = resolve_model(args.model)
        except ModelUnavailable as err:
            raise UnknownTask(str(err)) from None
    except UnknownTask as err:
        print(f"evaluators: error: {err.args[0]}", file=sys.stderr)
        return 2

    from evaluators.pool import Evaluator
    from evaluators.tasks.base import SPLITS

    plan = EvalPlan(
        objectives={"objective": dict.fromkeys(tasks, 1.0)},
        actor_names=(),
        namespace="",
        max_length=args.max_length,
        batch_size=args.batch_size,
        threads=args.threads,
        budget=EvalBudget(
            max_documents=args.max_documents,
            max_queries=args.max_queries,
            max_test=args.max_test,
            fewshot_k=args.fewshot_k,
            repeats=args.repeats,
            max_train=args.max_train,
            probe_head=args.probe_head,
        ),
    )
    with tempfile.TemporaryDirectory() as scratch:
        evaluator = Evaluator(plan, str(args.cache_dir or scratch))
        pooling = _pooling(model_dir, args.pooling)
        scores = evaluator.score(model_dir, pooling, tasks)
    print(f"model {args.model} ({pooling} pooling, {args.max_length} tokens); main score ± standard error")
    width = max(len(t) for t in tasks) + 6
    for task, values in scores.items():
        for split in SPLITS:
            part = values[split]
            scored = sizes(part)
            counts = {*scored, *(f"{unit}{TOTAL_SUFFIX}" for unit in scored)}
            details = ", ".join(f"{k} {v:.4f}" for k, v in part.items() if k not in ("main", "main_se", *counts))
            on = f"; {coverage(part)}" if scored else ""
            print(f"{task + ' ' + split:{width}s}  {part['main']:.4f} ± {part['main_se']:.4f}  ({details}{on})")
    if args.json:
        args.json.write_text(json.dumps({"model": args.model, "pooling": pooling, "scores": scores}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
