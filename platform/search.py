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
from doctune_core.run_layout import LEADERBOARD_CSV, SEARCH_RECORD
from evaluators.part_sizes import small_parts
from platform.cluster.autoscaling import cluster_to_plan_for
from platform.cluster.ray_cluster import ray_init, starts_its_own_ray
from platform.cluster.resources import InfeasibleResources
from platform.exit_codes import EXIT_BAD_INPUT, EXIT_FAILURE, EXIT_OK, UsageError
from platform.rundir.layout import write_atomic
from platform.rundir.timings import PhaseClock
from platform.search_path.inputs import InputsPlan, check_inputs, prepare_inputs
from platform.search_path.resolution import SearchRequest, resolve, settle, this_machine
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
    provisional = request.provisional_spec()
    if request.resume:  # a run an earlier doctune saved is refused before Ray starts
        from platform.rundir.storage import run_files_of
        from platform.search_path.tuner import refuse_unreadable_state

        commit = request.recorded.get("environment", {}).get("git_commit") or "not recorded"
        refuse_unreadable_state(
            request.storage or run_files_of(request.run_dir),
            f"Finish it with the doctune that started it (commit {commit}), or search again in a new run "
            "directory; python -m platform.report and python -m platform.export still read this run",
        )
    # a search that starts its own Ray knows its cluster now: bad input is refused before Ray starts
    settled = settle(request, this_machine()) if starts_its_own_ray(provisional.address) else None
    check_inputs(InputsPlan.of(settled[0] if settled else provisional))

    import ray

    with clock.phase("ray start"):
        population = provisional.search.scheduler.pbt is not None
        may_wait = request.resume or population
        cluster = ray_init(provisional.address, trials_may_wait=may_wait, log_to_driver=not dry_run)
    growth = None
    try:
        if settled is None:  # a running cluster: plan for what its autoscaler may add too
            cluster, growth = cluster_to_plan_for(cluster)
            if growth:
                log.info(f"doctune: cluster: {growth}")
        spec, profile, replaced, fit = settled or settle(request, cluster)
        run_dir = request.run_dir
        with clock.phase("inputs"):  # the corpus is prepared by a Ray Data job the first time
            model_dir, corpus, source_model = prepare_inputs(
                InputsPlan.of(spec), plan_only=dry_run, storage=request.storage
            )
        resolved = resolve(
            spec,
            spec_path=request.spec_path,
            profile=profile,
            run_dir=run_dir,
            model_dir=model_dir,
            corpus=corpus,
            cluster=cluster,
            source_model=source_model,
            replaced=replaced,
            fit=fit,
            growth=growth,
        )
        if request.storage:
            resolved = resolved.stored_at(request.storage.uri)
        summary = resolved.summary()
        if dry_run:
            if resolved.inputs.base is not None:
                state = "cached" if Path(model_dir).is_dir() else "not trained yet: a run trains it first"
                log.info(f"doctune: base {resolved.inputs.base.label} ({state}): {model_dir}")
            from evaluators.lengths import task_length_lines

            lines = task_length_lines(resolved.evaluation)
            ray.shutdown()  # first: Ray's own last words (its log deduplication's) never follow the summary
            for line in lines:
                log.info(f"doctune: {line}")
            return SearchOutcome(EXIT_OK, [], run_dir, summary)  # the command line prints the plan
        if not request.resume:
            run_dir.mkdir(parents=True)
            write_atomic(run_dir / SEARCH_RECORD, json.dumps(summary, indent=2, default=str))
        if not request.storage:
            code, rows = _prepare_and_search(resolved, request.resume, clock)
            return SearchOutcome(code, rows, run_dir, summary)
        from platform.rundir.records import RunRecords

        records = RunRecords(request.storage, run_dir)
        with records.kept_current():  # the driver's records follow in the storage, whatever ends the search
            code, rows = _prepare_and_search(resolved, request.resume, clock)
        return SearchOutcome(EXIT_FAILURE if records.behind else code, rows, run_dir, summary)
    finally:
        ray.shutdown()


def _prepare_and_search(resolved, resume: bool, clock: PhaseClock) -> tuple[int, list]:
    """In a run directory that exists: the base stage (when the spec has one), the evaluator pool,
    then the search and its report. The exit code and the leaderboard's rows."""
    from platform.search_path import tuner

    inputs, run_dir, profile = resolved.inputs, resolved.run_dir, resolved.profile
    if inputs.base is not None:  # trained (or taken from the cache) now that Ray runs and the run is recorded
        with clock.phase("base stage"):
            files = resolved.train_plan.run_files
            model_dir, _, source_model = prepare_inputs(inputs, build_base_in=run_dir, storage=files)
        resolved = resolved.with_base(model_dir, source_model)
    if resolved.storage is not None:  # its nodes may not see this machine's cache: the inputs go through the storage
        with clock.phase("inputs shared"):
            resolved = _share_inputs(resolved)
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


def _share_inputs(resolved):
    """The search with its inputs in the driver's cache uploaded to the run's storage, once
    (``trainers.inputs``), for Train workers on nodes that do not see this machine's cache."""
    from doctune_core.data import cache_dir
    from trainers.inputs import share_inputs

    plan = resolved.train_plan
    paths = (plan.base_model, plan.corpus_path, *filter(None, [plan.neighbours_path, plan.anchor_targets_path]))
    inputs = share_inputs(plan.run_files, paths, cache_dir())
    for path, name in inputs.items():
        log.info(f"doctune: {path} shared through the run's storage as {name}")
    return dataclasses.replace(resolved, train_plan=dataclasses.replace(plan, inputs=inputs))


def _search_and_report(resolved, resume: bool, clock: PhaseClock) -> tuple[int, list]:
    """With the evaluators up: the baselines and the trials, then what they establish
    (``platform.results``: the leaderboard, the winner's comparison with the baselines), the
    winner's export to ``best/``, the report and the timings."""
    from platform import export, results, tracking
    from platform.results import leaderboard
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
    log.info("\n" + leaderboard.format_table(rows, standing.columns) + "\n")
    for line in leaderboard.coverage_lines(rows, standing.columns):
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
