"""``python -m platform.search SPEC [--profile P] [--run-dir DIR] [--storage URI] [--resume] [--validation-only]
[--dry-run]``

Runs one hyperparameter search. Exit codes: 0 success, 2 bad input (one message naming what
is wrong and how to fix it; nothing started), 1 any other failure. ``run`` is the same search
called from Python (``doctune.search``): it raises bad input (``BAD_INPUT``) and returns the
leaderboard's rows.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from doctune_core.logs import add_verbosity_options, show_on_console
from doctune_core.run_layout import LEADERBOARD_CSV
from evaluators.part_sizes import small_parts
from platform.cluster.resources import InfeasibleResources
from platform.exit_codes import EXIT_BAD_INPUT, EXIT_FAILURE, EXIT_OK, UsageError
from platform.rundir.timings import PhaseClock
from platform.search_path.request import SearchRequest
from platform.search_path.resolution import resolved_search
from platform.spec import PROFILES, SpecError

log = logging.getLogger(f"doctune.{__name__}")

if TYPE_CHECKING:
    from platform.search_path.listeners import TrialListener


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m platform.search", description=__doc__.split("\n\n")[1])
    parser.add_argument("spec", help="a spec file, or a spec name in search_spaces/ (with or without .yaml)")
    parser.add_argument(
        "--profile",
        choices=PROFILES,
        help="full (GPU cluster), local (2 CPUs, about 30 min warm), smoke (minutes); "
        "default: full when the cluster has GPUs, else local",
    )
    parser.add_argument("--run-dir", type=Path, help="default: runs/<spec name> in the current directory")
    parser.add_argument(
        "--storage",
        metavar="URI",
        help="keep the run's trials and records there, for nodes that share no file system (s3://bucket/prefix, "
        "gs://..., a path; platform/rundir/storage.py); with --resume and no run dir yet, its records are "
        "fetched first",
    )
    resuming = parser.add_mutually_exclusive_group()
    resuming.add_argument("--resume", action="store_true", help="continue the search in an existing run dir")
    resuming.add_argument(
        "--resume-if-started",
        action="store_true",
        help="continue the search if the run dir (or --storage) holds one, else start it: "
        "for a job a scheduler retries (cluster/kuberay.yaml, cluster/slurm.sbatch)",
    )
    parser.add_argument(
        "--validation-only",
        action="store_true",
        help="read no locked test part and print no test verdict (evaluation.locked_part: false): for a run made "
        "to measure something; a resumed search keeps the choice its start made",
    )
    parser.add_argument("--dry-run", action="store_true", help="validate, plan and print; start no trial")
    add_verbosity_options(parser)
    return parser.parse_args(argv)


@dataclasses.dataclass(frozen=True)
class SearchOutcome:
    """How a search call ended: ``code`` (``EXIT_OK``, or ``EXIT_FAILURE`` when no trial scored or
    the run's records could not reach its storage), the leaderboard's rows as ranked (none for a dry
    run), the run directory, and the plan ``search.json`` records (what a dry run prints)."""

    code: int
    rows: list
    run_dir: Path
    plan: dict


def bad_input() -> tuple[type[Exception], ...]:
    """The errors a search raises for bad input (spec, model, corpus, run directory, storage,
    resources), each with one message naming what is wrong and how to fix it; nothing was started."""
    from doctune_core.data import DataUnavailable
    from doctune_core.encoder import ModelUnavailable

    return (SpecError, UsageError, InfeasibleResources, ModelUnavailable, DataUnavailable)


def run(
    spec: str | Path,
    profile: str | None = None,
    run_dir: Path | None = None,
    storage: str | None = None,
    resume: bool = False,
    resume_if_started: bool = False,
    dry_run: bool = False,
    on_trial: TrialListener | None = None,
    validation_only: bool = False,
) -> SearchOutcome:
    """One search in this process, as the command line's options say (``on_trial``: called with each
    trial's id and every round it reports; ``validation_only``: no locked test part read). Raises
    ``bad_input()``'s errors, ``BaseStageFailed`` when the base stage fails, ``KeyboardInterrupt`` when
    interrupted (the same call with ``resume=True`` continues it)."""
    from platform.search_path.listeners import listening
    from platform.tracking.trackers.wandb_runs import use_own_service

    clock = PhaseClock()
    use_own_service()
    request = SearchRequest.from_command_line(
        str(spec), profile, run_dir, resume, storage, resume_if_started, validation_only
    )
    with listening(on_trial):
        return _run(request, dry_run, clock)


def main(argv: list[str] | None = None) -> int:
    from trainers.base_stage import BaseStageFailed

    args = parse_args(argv)
    show_on_console(args.verbosity)
    try:
        options = dict(profile=args.profile, run_dir=args.run_dir, storage=args.storage, resume=args.resume)
        outcome = run(
            args.spec,
            **options,
            resume_if_started=args.resume_if_started,
            dry_run=args.dry_run,
            validation_only=args.validation_only,
        )
        if args.dry_run:  # the plan is the dry run's output, -q or not
            print(json.dumps(outcome.plan, indent=2, default=str))
        return outcome.code
    except bad_input() as err:
        print(f"doctune: error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BaseStageFailed as err:
        print(f"doctune: error: {err}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        print("doctune: interrupted; continue with --resume", file=sys.stderr)
        return EXIT_FAILURE


def _run(request: SearchRequest, dry_run: bool, clock: PhaseClock) -> SearchOutcome:
    with resolved_search(request, dry_run=dry_run, clock=clock) as under_way:
        resolved = under_way.resolved
        summary, run_dir = resolved.summary(), resolved.run_dir
        if dry_run:
            lines = _dry_run_lines(resolved)
        else:
            code, rows = _evaluate_and_search(resolved, request.resume, clock)
    if dry_run:  # after Ray's shutdown: its own last words (its log deduplication's) never follow the summary
        for line in lines:
            log.info(f"doctune: {line}")
        return SearchOutcome(EXIT_OK, [], run_dir, summary)  # the command line prints the plan
    return SearchOutcome(EXIT_FAILURE if under_way.records_behind else code, rows, run_dir, summary)


def _dry_run_lines(resolved) -> list[str]:
    """What a dry run says beside its plan: a base the spec trains (cached or not), and the lengths
    of the texts each task scores."""
    from evaluators.lengths import task_length_lines

    lines = []
    if resolved.inputs.base is not None:
        model_dir = resolved.train_plan.base_model
        state = "cached" if Path(model_dir).is_dir() else "not trained yet: a run trains it first"
        lines.append(f"base {resolved.inputs.base.label} ({state}): {model_dir}")
    return lines + task_length_lines(resolved.evaluation)


def _evaluate_and_search(resolved, resume: bool, clock: PhaseClock) -> tuple[int, list]:
    """In a run directory that exists, with the inputs ready: the evaluator pool, then the search and
    its report. The exit code and the leaderboard's rows."""
    from platform.search_path import tuner

    inputs, run_dir, profile = resolved.inputs, resolved.run_dir, resolved.profile
    recipes = ", ".join(inputs.recipes)
    log.info(f"doctune: search {resolved.search.name!r}, profile {profile!r}, recipe {recipes}, run dir {run_dir}")
    stats = resolved.corpus_stats
    log.info(
        f"doctune: corpus {inputs.corpus.source!r}: {stats.documents} documents, {stats.sentences} sentences "
        f"({stats.single_sentence_documents} single-sentence, {stats.dropped_empty} empty dropped, "
        f"{stats.truncated} truncated, {stats.replaced_invalid_utf8} with invalid UTF-8 replaced)",
    )
    pool = tuner.evaluator_pool(resolved)
    with clock.phase("evaluators start"):
        pool.start()
    if warning := small_parts(pool.part_items()):
        log.warning(f"doctune: warning: {warning}")
    with pool:
        return _search_and_report(resolved, resume, clock)


def _search_and_report(resolved, resume: bool, clock: PhaseClock) -> tuple[int, list]:
    """With the evaluators up: the baselines and the trials, then what they establish
    (``platform.results``: the leaderboard, the winner's comparison with the baselines), the
    winner's export to ``best/``, the report and the timings."""
    from platform import export, results, tracking
    from platform.results import text
    from platform.rundir.timings import trial_seconds, write_timings
    from platform.search_path import tuner

    run_dir = resolved.run_dir
    trackers = tracking.open_trackers(resolved.tracking, resolved.search.name, run_dir)
    trackers.start(resolved.spec_record, resolved.profile, run_dir)
    baseline = results.baseline_record(resolved, clock)
    with trackers.fed(dataclasses.asdict(resolved.fixed)) as tracked:
        trials = tuner.run_search(resolved, resume, clock, [tracked] if tracked else [])

    def retrain(config: dict, seeds: list[int], name: str):
        return tuner.train_seeds(resolved, config, seeds, name)

    standing = results.establish(resolved, trials, baseline=baseline, clock=clock, retrain=retrain)
    rows = standing.rows
    log.info("\n" + text.format_table(rows, standing.columns) + "\n")
    for line in text.coverage_lines(rows, standing.columns):
        log.info(f"doctune: scored on {line}")
    best = standing.best
    if best is None:
        log.warning("doctune: no trial produced a score; see the statuses above")
        trackers.finish(rows, run_dir, None)
        return EXIT_FAILURE, rows
    exported = export.export_best(best, run_dir, resolved.train_plan.run_files)
    locked = "test" in resolved.evaluation.parts
    test = f"{best.test_objective:.4f}" if best.test_objective is not None else "not scored" if locked else "not read"
    log.info(
        f"doctune: best trial {best.trial} (validation objective {best.objective:.4f}, test objective "
        f"{test}) exported to {exported.path}",
    )
    for line in results.verdict_lines(standing):
        log.info(f"doctune: {line}")
    if not locked:
        log.info(
            "doctune: validation only (--validation-only): no locked test part was read, and no test verdict given"
        )
    if exported.sentence_transformers_gap:
        log.info(f"doctune: {exported.path} has no sentence-transformers files: {exported.sentence_transformers_gap}")
    logs = run_dir if resolved.storage is None else f"{resolved.storage} (Tune's logs, under tune/)"
    log.info(f"doctune: leaderboard in {run_dir}/{LEADERBOARD_CSV}; TensorBoard: tensorboard --logdir {logs}")
    try:  # the leaderboard and best/ are written: a report that fails loses nothing and fails no search
        from platform.report import write_reports

        log.info(f"doctune: report in {write_reports(run_dir)[-1]}")
    except Exception as err:
        log.warning(f"doctune: report not written: {type(err).__name__}: {err}")
    log.info(f"doctune: {write_timings(run_dir, clock.summary(trial_seconds(trials, since=clock.started_at)))}")
    trackers.finish(rows, run_dir, exported.path)
    return EXIT_OK, rows


if __name__ == "__main__":
    sys.exit(main())
