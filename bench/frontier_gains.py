"""A study's learning curves as paired gains: each row's gain over its untrained start at every
scored step, for each seed and as the seeds' mean, with 95% intervals: on the objective's
long-document tasks pooled with their weights, on the whole objective, and on each other task.

    .venv/bin/python bench/frontier_gains.py [STUDY_DIR] [--spec bench/training_frontier.yaml]
        [--profile local] [--out bench/results/frontier_gains.json] [--merge ALPHA ...]

STUDY_DIR is a run of ``python -m platform.study SPEC --profile PROFILE --validation-only`` with
``study.rounds`` (default ``runs/training_frontier``), its checkpoints kept. Every kept checkpoint
and the row's untrained start (the converted base, or the base with interpolated positions) are
scored again, in this process, on the objective's tasks' validation items, through
the same evaluation plan as the study (``platform.search_path.plans.evaluation_plan``), so the study's
embedding cache answers what it already embedded. The gain of one run is ``paired_gain`` (items
paired, no seed term); the row's, ``seed_mean_gain`` over its seeds (the seeds' spread included).
This is the paired counterpart of ``bench/long_study_column.py --rounds``, whose unpaired screen adds
both rows' item errors and is conservative. Validation only: no test part is read.

Beside the gains, what training did to the geometry (``geometry_table``): the mean cosine between
each checkpoint's and its start's embeddings of the short tasks' validation texts
(``Evaluator.start_cosine``: 1.0 unmoved), and each long task's documents' mean pairwise cosine
(``doc_cosine``) before and after: a long gain that comes with documents spread apart may be
de-collapse rather than reading (arXiv 2410.24200). And what each row cost (``cost_table``): its
runs' training and scoring time up to each step, in CPU-minutes, from each round's ``report.json``.

``--merge ALPHA`` also scores each checkpoint's weights interpolated with its start's, start +
ALPHA x (trained - start): WiSE-FT's weight-space ensemble (Wortsman et al. 2022, "Robust fine-tuning
of zero-shot models", Sec. 2, Eq. 1), one way to keep what the start could do while keeping part of
what training added. Each is a row of its own, "ROW, merged ALPHA"; the merged weights are written
beside the checkpoint (``merged_ALPHA/``) and scored like it.

Writes ``--out`` after each checkpoint; started again it goes on where it stopped.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))

from bench.markdown import table  # noqa: E402

TRIAL_DIR = re.compile(r"^run_trial_(\w+?_\d+)_\d+_seed=(\d+)_")
SECONDS = ("train_seconds", "scoring_seconds")
# the geometry table's short names for the default objective's tasks
TASK_NAMES = {
    "news-title-retrieval": "titles",
    "r8-fewshot": "R8",
    "needle-retrieval": "needle",
    "passkey-retrieval": "passkey",
    "news-passage-retrieval": "passage",
}


def checkpoints(row_dir: Path) -> dict[int, dict[int, Path]]:
    """A row's kept checkpoints: seed -> step -> directory (Tune's trial directories name the seed)."""
    found: dict[int, dict[int, Path]] = {}
    for trial in sorted(row_dir.glob("tune/seeds-*/run_trial_*")):
        match = TRIAL_DIR.match(trial.name)
        if not match:
            continue
        trial_id, seed = match.group(1), int(match.group(2))
        for step_dir in sorted((row_dir / "trials" / trial_id / "checkpoints").glob("step_*")):
            found.setdefault(seed, {})[int(step_dir.name.split("_")[1])] = step_dir
    return found


def round_seconds(row_dir: Path) -> dict[int, dict[int, dict[str, float]]]:
    """A row's cost: seed -> step -> the training and the scoring seconds its run spent up to that step,
    summed over its rounds' reports (each checkpoint keeps its round's, ``report.json``, across resumes)."""
    found: dict[int, dict[int, dict[str, float]]] = {}
    for seed, steps in checkpoints(row_dir).items():
        spent = dict.fromkeys(SECONDS, 0.0)
        for step, directory in sorted(steps.items()):
            report = json.loads((directory / "report.json").read_text())
            spent = {key: spent[key] + report[key] for key in SECONDS}
            found.setdefault(seed, {})[step] = spent
    return found


def merged(start: Path, checkpoint: Path, alpha: float) -> Path:
    """``checkpoint`` with its weights moved back toward ``start``'s: start + alpha x (trained - start),
    written once to ``checkpoint/../merged_ALPHA/STEP`` (every other file the checkpoint's own)."""
    from safetensors.torch import load_file, save_file

    into = checkpoint.parent / f"merged_{alpha:g}" / checkpoint.name
    if (into / "model.safetensors").exists():
        return into
    trained, initial = load_file(str(checkpoint / "model.safetensors")), load_file(str(start / "model.safetensors"))
    if trained.keys() != initial.keys():
        raise SystemExit(f"{checkpoint} and {start} hold different weights; --merge needs the same architecture")
    shutil.copytree(checkpoint, into, ignore=shutil.ignore_patterns("model.safetensors"), dirs_exist_ok=True)
    weights = {key: initial[key] + alpha * (value - initial[key]) for key, value in trained.items()}
    save_file(weights, str(into / "model.safetensors.partial"))
    (into / "model.safetensors.partial").rename(into / "model.safetensors")  # complete or absent
    return into


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("study", type=Path, nargs="?", default=ROOT / "runs" / "training_frontier")
    parser.add_argument("--spec", default=str(ROOT / "bench" / "training_frontier.yaml"))
    parser.add_argument("--profile", default="local")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "frontier_gains.json")
    parser.add_argument(
        "--merge",
        type=float,
        nargs="*",
        default=[],
        metavar="ALPHA",
        help="also score each checkpoint interpolated with its start at these weights of the trained",
    )
    args = parser.parse_args()
    import torch

    from doctune_core.longformer import cached_interpolated
    from doctune_core.noise import paired_gain
    from evaluators.pool import Evaluator
    from evaluators.tasks import task_class
    from platform.search_path.inputs import InputsPlan, prepare_inputs
    from platform.search_path.plans import evaluation_plan
    from platform.spec import load_spec

    spec, _ = load_spec(args.spec, args.profile)
    objective = dict(spec.search.objective.tasks)
    long_tasks = {t: w for t, w in objective.items() if task_class(t).metadata.long_documents}
    named = ", ".join(f"{t} {w:g}" for t, w in long_tasks.items())
    groups = {f"long tasks pooled ({named})": long_tasks, "objective": objective}
    groups |= {task: {task: 1.0} for task in objective if task not in long_tasks}
    base = prepare_inputs(InputsPlan.of(spec), plan_only=True).model_dir
    fixed_start = spec.fixed_hyperparameters().position_init
    plan = evaluation_plan(spec)
    pooling = spec.fixed_hyperparameters().pooling
    evaluator = Evaluator(plan, str(args.study))
    results = json.loads(args.out.read_text()) if args.out.exists() else {}
    results["machine"] = f"{os.cpu_count()} CPUs, torch {torch.__version__}"
    results["cpus"] = os.cpu_count()
    results["groups"] = groups
    rows = results.setdefault("rows", {})
    starts: dict[str, dict] = {}

    def start_model(position_init: str) -> str:
        return base if position_init == "copy" else str(cached_interpolated(base))

    def start_outcomes(position_init: str) -> dict:
        if position_init not in starts:
            starts[position_init] = evaluator.outcomes(start_model(position_init), pooling, list(objective), "val")
        return starts[position_init]

    results["seconds"] = {
        name: {
            str(step): {str(seed): by_step[step] for seed, by_step in spent.items() if step in by_step}
            for step in sorted({step for by_step in spent.values() for step in by_step})
        }
        for name in spec.study.rows
        if (spent := round_seconds(args.study / "runs" / name))
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1))
    for name, values in spec.study.rows.items():
        start = values.get("position_init", fixed_start)
        for seed, steps in sorted(checkpoints(args.study / "runs" / name).items()):
            for step, directory in sorted(steps.items()):
                versions = {name: directory}
                versions |= {
                    f"{name}, merged {a:g}": merged(Path(start_model(start)), directory, a) for a in args.merge
                }
                for row, model in versions.items():
                    done = rows.setdefault(row, {}).setdefault(str(step), {})
                    if str(seed) in done:
                        continue
                    began = time.perf_counter()
                    trained = evaluator.outcomes(str(model), pooling, list(objective), "val")
                    done[str(seed)] = {
                        group: paired_gain(trained, start_outcomes(start), weights).record()
                        for group, weights in groups.items()
                    }
                    done[str(seed)]["start_cosine"] = evaluator.start_cosine(
                        str(model), start_model(start), pooling, list(objective)
                    )
                    done[str(seed)]["doc_cosine"] = {
                        task: [start_outcomes(start)[task].scores["doc_cosine"], trained[task].scores["doc_cosine"]]
                        for task in long_tasks
                    }
                    args.out.parent.mkdir(parents=True, exist_ok=True)
                    args.out.write_text(json.dumps(results, indent=1))
                    print(f"{row}, seed {seed}, step {step}: {time.perf_counter() - began:.0f} s", flush=True)

    print("\nvalidation, gain over the row's untrained start, 95% intervals")
    for group in groups:
        print(f"\n{group}\n")
        print("\n".join(gains_table(results, group)))
    print("\nwhat training did to the geometry\n")
    print("\n".join(geometry_table(results)))
    print("\nwhat each row cost\n")
    print("\n".join(cost_table(results)))


def gains_table(record: dict, group: str) -> list[str]:
    """One group's gains (a key of the record's ``groups``, or its first words: ``long tasks pooled``),
    a row per study row and step: each seed's paired gain (``*``: its own interval, items only,
    excludes 0) and the seeds' mean with its 95% interval (``seed_mean_gain``: the seeds' spread
    included; bold where it excludes 0)."""
    from doctune_core.noise import Gain, seed_mean_gain

    (key,) = [name for name in record["groups"] if name.split(" (")[0] == group.split(" (")[0]]
    lines = []
    for name, by_step in record["rows"].items():
        for step, by_seed in sorted(by_step.items(), key=lambda kv: int(kv[0])):
            gains = [Gain.from_record(run[key]) for _, run in sorted(by_seed.items(), key=lambda kv: int(kv[0]))]
            seeds = " / ".join(f"{g.difference:+.3f}" + ("*" if g.beyond_noise else "") for g in gains)
            if len(gains) < 2:  # a study in progress: no seeds' spread yet
                lines.append([f"{name}, {step}", seeds, "– (one seed so far)"])
                continue
            mean = seed_mean_gain(gains)
            shown = mean.cell().replace(" s)", ")") if mean.low is not None else mean.cell()
            lines.append([f"{name}, {step}", seeds, f"**{shown}**" if mean.beyond_noise else shown])
    seeds_header = "seeds " + " / ".join(sorted(next(iter(next(iter(record["rows"].values())).values())), key=int))
    return table(["row, step", seeds_header, "the seeds' mean (95%)"], lines)


def geometry_table(record: dict) -> list[str]:
    """Per row and step, the seeds' mean of each short task's cosine to the start
    (``start_cosine``) and of each long task's documents' mean pairwise cosine, the start's then the
    trained model's; runs scored before these were recorded are left out."""
    lines, short, long = [], [], []
    for by_step in record["rows"].values():
        for runs in by_step.values():
            for run in runs.values():
                short += [t for t in run.get("start_cosine", {}) if t not in short]
                long += [t for t in run.get("doc_cosine", {}) if t not in long]
    for name, by_step in record["rows"].items():
        for step, by_seed in sorted(by_step.items(), key=lambda kv: int(kv[0])):
            runs = [run for run in by_seed.values() if "start_cosine" in run]
            if not runs:
                continue
            cells = [f"{sum(run['start_cosine'][t] for run in runs) / len(runs):.3f}" for t in short]
            for task in long:
                before, after = (sum(run["doc_cosine"][task][i] for run in runs) / len(runs) for i in (0, 1))
                cells.append(f"{before:.3f}→{after:.3f}")
            lines.append([f"{name}, {step}", str(len(runs)), *cells])
    header = ["row, step", "seeds", *(f"{TASK_NAMES.get(t, t)} vs start" for t in short)]
    header += [f"{TASK_NAMES.get(t, t)} docs" for t in long]
    return table(header, lines)


def cost_table(record: dict) -> list[str]:
    """Per row and step, the median over its seeds of the training and the scoring time its runs spent
    up to that step, in CPU-minutes (minutes times the machine's CPUs: a local trial holds them all)."""
    cpus = record.get("cpus", 1)
    lines = []
    for name, by_step in record.get("seconds", {}).items():
        for step, by_seed in sorted(by_step.items(), key=lambda kv: int(kv[0])):
            runs = list(by_seed.values())
            train, scoring = (statistics.median(run[k] for run in runs) * cpus / 60 for k in SECONDS)
            lines.append([f"{name}, {step}", str(len(runs)), f"{train:.0f}", f"{scoring:.0f}"])
    return table(["row, step", "seeds", "training, CPU-min", "scoring, CPU-min"], lines)


if __name__ == "__main__":
    main()
