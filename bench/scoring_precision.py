"""A scoring round in bf16 against fp32 (`evaluation.bf16`): its wall time and what it changes in the
scores.

    .venv/bin/python bench/scoring_precision.py [--spec docsplit_long --profile local]
        [--repeats 2] [--threads 2] [--model DIR]

One round as a search's evaluator scores a checkpoint: the spec's objective tasks at the profile's
limits and lengths (long-document tasks at ``long_length``, their longest haystacks where the
profile says so), validation only, through ``evaluators.pool.Evaluator`` in a fresh process with an
empty embedding cache each time, fp32 and bf16 alternating (``--repeats`` pairs). The model is the
spec's base converted as the search converts it (a Longformer where the spec has one), or
``--model``. Printed: each round's wall time, the bf16 / fp32 ratio of each pair with their median,
and each task's validation score in both precisions (every repeat scores the same items, so the
scores repeat exactly and one pair gives them). Bf16 computes only on a GPU or a CPU with
AVX512-BF16 (``doctune_core.encoder.computes_bf16``): elsewhere the script says so and stops.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from child import ROOT, cpu_name, run_child  # bench/child.py, beside this script


def _plan(spec_name: str, profile: str, threads: int, bf16: bool):
    from evaluators.plan import EvalPlan
    from platform.spec import load_spec

    spec, _ = load_spec(spec_name, profile)
    return EvalPlan(
        objectives=spec.search.objective.named(),
        actor_names=(),
        namespace="",
        budget=spec.evaluation.limits,
        max_length=spec.evaluation.max_length,
        batch_size=spec.evaluation.batch_size,
        threads=threads,
        parts=("val",),
        bf16=bf16,
    )


def child(config: dict) -> dict:
    sys.path.insert(0, str(ROOT))
    from evaluators.pool import Evaluator

    plan = _plan(config["spec"], config["profile"], config["threads"], config["precision"] == "bf16")
    with tempfile.TemporaryDirectory() as run_dir:
        evaluator = Evaluator(plan, run_dir)
        began = time.perf_counter()
        scores = evaluator.score(config["model"], config["pooling"])
        wall = time.perf_counter() - began
    main = {task: scores[task]["val"]["main"] for task in plan.tasks}
    return {"wall": wall, "main": main, "objective": plan.objective_of(main)}


def scored_model(spec_name: str, profile: str, scratch: str) -> tuple[str, str]:
    """The spec's base as its search scores it (converted where the spec converts it), and the pooling."""
    from doctune_core.encoder import resolve_model
    from doctune_core.longformer import convert_to_longformer
    from platform.spec import load_spec

    spec, _ = load_spec(spec_name, profile)
    model = resolve_model(spec.base_model)
    if (longformer := spec.backbone.longformer) is not None:
        model = str(convert_to_longformer(model, scratch, longformer.max_length, longformer.attention_window))
    return model, spec.fixed_hyperparameters().pooling


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spec", default="docsplit_long")
    parser.add_argument("--profile", default="local")
    parser.add_argument("--repeats", type=int, default=2, help="fp32 / bf16 pairs, alternating")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--model", help="a checkpoint to score instead of the spec's converted base")
    parser.add_argument("--child")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return
    sys.path.insert(0, str(ROOT))
    import torch

    from doctune_core.encoder import computes_bf16

    if not computes_bf16(torch.device("cpu")):
        raise SystemExit("this CPU has no AVX512-BF16: evaluation.bf16 scores in fp32 here, nothing to compare")
    with tempfile.TemporaryDirectory() as scratch:
        model, pooling = scored_model(args.spec, args.profile, scratch)
        if args.model:
            model = str(Path(args.model).resolve())
        config = {"spec": args.spec, "profile": args.profile, "threads": args.threads, "model": model}
        rounds = {"fp32": [], "bf16": []}
        for repeat in range(args.repeats):
            for precision in ("fp32", "bf16"):
                done = run_child(__file__, config | {"precision": precision, "pooling": pooling})
                rounds[precision].append(done)
                print(f"repeat {repeat}, {precision}: {done['wall']:.1f} s, objective {done['objective']:.4f}")
    ratios = [b["wall"] / f["wall"] for f, b in zip(rounds["fp32"], rounds["bf16"], strict=True)]
    print(f"\n{cpu_name()}; torch {torch.__version__}; {args.threads} thread(s); {args.spec} --profile {args.profile}")
    print(f"model: {'--model ' + args.model if args.model else 'the spec base, converted as the search converts it'}")
    walls = {p: statistics.median(r["wall"] for r in rounds[p]) for p in rounds}
    print(f"round wall time, median: fp32 {walls['fp32']:.1f} s, bf16 {walls['bf16']:.1f} s")
    print(f"bf16 / fp32 per pair: {', '.join(f'{r:.2f}' for r in ratios)}; median {statistics.median(ratios):.2f}\n")
    repeat_exactly = all(len({json.dumps(r["main"]) for r in rounds[p]}) == 1 for p in rounds)
    print(f"each precision's scores the same in every repeat: {'yes' if repeat_exactly else 'NO'}")
    print("| task | fp32 | bf16 | bf16 - fp32 |\n|---|---|---|---|")
    fp32, bf16 = rounds["fp32"][0], rounds["bf16"][0]
    rows = [(task, fp32["main"][task], bf16["main"][task]) for task in fp32["main"]]
    for name, before, after in [*rows, ("objective", fp32["objective"], bf16["objective"])]:
        print(f"| {name} | {before:.4f} | {after:.4f} | {after - before:+.4f} |")


if __name__ == "__main__":
    main()
