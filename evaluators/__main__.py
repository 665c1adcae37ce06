"""``python -m evaluators --model DIR_OR_ID --task NAME [--task NAME ...] [--beir DIR ...] [--part test] [--json OUT]``

Scores any encoder (a search's winner, a base model, any Hugging Face model) on doctune's tasks,
through the same ``Evaluator`` class the search's actors run, and prints a table: on each task's
validation part, or on its locked test part alone with ``--part test`` (read it once a choice is
made; it reports, never chooses). ``--list``
shows the tasks. Exit codes: 0 success, 2 bad input (unknown task, missing model), 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from evaluators.evaluate import evaluate
from evaluators.plan import EvalBudget
from evaluators.scores import TOTAL_SUFFIX, coverage, sizes, strata, stratum_keys
from evaluators.tasks import TASK_FAMILIES, TASKS, UnknownTask, check_task_name


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m evaluators", description=__doc__.split("\n\n")[1])
    parser.add_argument("--model", help="model directory, packaged alias (all-minilm-l6-v2) or Hugging Face id")
    parser.add_argument("--task", action="append", default=[], help="a task name (repeatable); see --list")
    parser.add_argument("--beir", action="append", default=[], help="a BEIR-format directory to score (repeatable)")
    parser.add_argument(
        "--pooling", choices=("cls", "mean", "max"), help="default: the model's doctune.json, else mean"
    )
    parser.add_argument("--max-length", type=int, default=512, help="tokens per text (other than long-document tasks)")
    parser.add_argument(
        "--long-length",
        type=int,
        default=4096,
        help="tokens per text of long-document tasks (needle, passkey, passage)",
    )
    parser.add_argument(
        "--longformer",
        type=int,
        metavar="MAX_LENGTH",
        help="convert the model to a Longformer of this many positions first, as a search's backbone does "
        "(cached), and score that, untrained",
    )
    parser.add_argument("--attention-window", type=int, default=256, help="the --longformer's local attention window")
    parser.add_argument(
        "--long-inputs",
        choices=("task", "truncate", "chunk"),
        default="task",
        help="texts over the length: as each task says, truncated, or averaged over windows (chunk)",
    )
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--max-documents", type=int, help="retrieval corpus limit")
    parser.add_argument("--max-queries", type=int, help="retrieval queries (and length-robustness pairs) limit")
    parser.add_argument(
        "--long-queries",
        type=int,
        default=50,
        help="needle and passkey queries per haystack length (each length's pool holds twice as many haystacks)",
    )
    parser.add_argument(
        "--haystacks", choices=["grid", "longest"], default="grid", help="needle, passkey lengths: all or longest"
    )
    parser.add_argument("--max-test", type=int, help="probe / clustering test examples (and test pairs) limit")
    parser.add_argument("--max-train", type=int, help="full-probe training examples (and training pairs) limit")
    parser.add_argument("--probe-head", choices=("logistic", "mlp"), default="logistic", help="probe classifier")
    parser.add_argument("--fewshot-k", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cache-dir", type=Path, help="embedding cache (default: a temporary directory)")
    parser.add_argument(
        "--part",
        choices=("val", "test"),
        default="val",
        help="the part scored: validation (default), or the locked test part (to report a choice already made)",
    )
    parser.add_argument("--json", type=Path, help="also write the scores here")
    parser.add_argument("--list", action="store_true", help="list the tasks and exit")
    return parser.parse_args(argv)


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
    budget = EvalBudget(
        max_documents=args.max_documents,
        max_queries=args.max_queries,
        max_test=args.max_test,
        fewshot_k=args.fewshot_k,
        repeats=args.repeats,
        max_train=args.max_train,
        probe_head=args.probe_head,
        long_length=args.long_length,
        long_queries=args.long_queries,
        haystacks=args.haystacks,
    )
    try:
        if not args.model or not tasks:
            raise UnknownTask("name a --model and at least one --task or --beir (see --list)")
        for task in tasks:
            check_task_name(task)
        model = args.model
        if args.longformer:
            from doctune_core.data import cache_dir
            from doctune_core.encoder import ModelUnavailable, resolve_model
            from doctune_core.longformer import cached_longformer

            if args.attention_window % 2 or not 0 < args.attention_window <= args.longformer:
                raise UnknownTask(
                    f"--attention-window {args.attention_window}: give an even window of at most --longformer's "
                    f"{args.longformer} positions (256 is the default spec's)"
                )
            try:
                model = resolve_model(args.model)
            except ModelUnavailable as err:
                raise UnknownTask(str(err)) from None
            model = str(cached_longformer(model, args.longformer, args.attention_window, cache_dir()))
        done = evaluate(
            model,
            tasks,
            pooling=args.pooling,
            max_length=args.max_length,
            batch_size=args.batch_size,
            threads=args.threads,
            budget=budget,
            long_inputs=None if args.long_inputs == "task" else args.long_inputs,
            cache_dir=args.cache_dir,
            parts=(args.part,),
        )
    except UnknownTask as err:
        print(f"evaluators: error: {err.args[0]}", file=sys.stderr)
        return 2

    scores, pooling, lengths = done.scores, done.pooling, done.lengths
    converted = f", converted to a {args.longformer}-token Longformer (untrained)" if args.longformer else ""
    scored_on = {"val": "the validation part", "test": "the locked test part"}[args.part]
    print(f"model {args.model}{converted} ({pooling} pooling), scored on {scored_on}; main score ± standard error")
    width = max(len(t) for t in tasks) + 6
    for task, values in scores.items():
        print(f"{task}: scored at {lengths[task]} tokens, texts over it {_policy(values)}")
        part = values[args.part]
        scored = sizes(part)
        counts = {*scored, *(f"{unit}{TOTAL_SUFFIX}" for unit in scored)}
        hidden = {"main", "main_se", "items_digest", "part_digest", *counts, *stratum_keys(part)}
        details = ", ".join(f"{k} {v:.4f}" for k, v in part.items() if k not in hidden)
        on = f"; {coverage(part)}" if scored else ""
        if args.part == "test":  # a locked-part figure carries its part's digest (bench/locked-part-readings.md)
            on += f"; part digest {int(part['part_digest'])}"
        print(f"{task + ' ' + args.part:{width}s}  {part['main']:.4f} ± {part['main_se']:.4f}  ({details}{on})")
        for line in strata_lines(part):
            print(f"{'':{width}s}  {line}")
    if done.locked_reading is not None:
        print(f"{done.locked_reading.describe()} (ledger {done.locked_reading.ledger})")
    if args.json:
        args.json.write_text(json.dumps({"model": args.model, "pooling": pooling, "scores": scores}, indent=2))
    return 0


def _policy(values: dict) -> str:
    if "chunked" in values:
        return f"averaged over windows ({values['chunked']:.0%} of them)"
    return f"truncated ({values.get('truncated', 0.0):.0%} of them)"


def strata_lines(part: dict[str, float]) -> list[str]:
    """One part's strata as lines: the length buckets in one line, a needle task's length x depth
    grid (main score, n) beneath."""
    by_stratum = strata(part)
    if not by_stratum:
        return []
    grid = {label: v for label, v in by_stratum.items() if "_depth" in label}
    lines = [
        "by length (tokens of the document to find): "
        + " | ".join(
            f"{label} {v['main']:.3f} ± {1.96 * v['se']:.3f} (n {int(v['n'])})"
            for label, v in by_stratum.items()
            if label not in grid
        )
    ]
    if grid:
        depths = list(dict.fromkeys(label.split("_depth")[1] for label in grid))
        lines.append("length \\ depth  " + "  ".join(f"{d + '%':>6s}" for d in depths))
        for length in dict.fromkeys(label.split("_depth")[0][3:] for label in grid):
            row = [grid.get(f"len{length}_depth{d}", {}).get("main", float("nan")) for d in depths]
            lines.append(f"{length:>14s}  " + "  ".join(f"{v:6.3f}" for v in row))
    return lines


if __name__ == "__main__":
    sys.exit(main())
