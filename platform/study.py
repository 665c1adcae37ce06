"""A recipe study: each paper's recipe trained from one base with its defaults, over several seeds,
then the best recipes tuned by the normal search; one table in the papers' shape and its chart.

    python -m platform.study SPEC [--profile local] [--run-dir DIR] [--task TASK ...]

SPEC is a search spec with a ``study:`` section (``search_spaces/seed_study.yaml``): its rows
(name -> the recipe and the hyperparameters the paper gives), its seeds, how many of the best rows
get a tuned version, and the table's columns (task -> metrics). ``--task`` adds tasks to the table
(e.g. ``beir:DIR`` collections that only exist on the machine at hand).

Every row is trained with nothing searched, one trial per seed (same steps, batch and base for all;
the seeds at once where the cluster has room, each batch of seeds one Tune run; every row trains a
batch before any row trains the next), all in one Ray session with one evaluator pool; each trial's
last checkpoint is scored on every table task. Rows are ranked by the spec's
objective (mean over seeds); the best ``tune_best`` rows are then searched over ``search.space``
with their own values as the starting point, and the winner's configuration is retrained with the
remaining seeds. The base model itself (untouched) is the first row. The study directory holds each
row's run and one result per seed (``runs/ROW/seedN/result.json``): an interrupted study started
again continues the batch it stood in and redoes nothing finished. It ends with ``study.md`` (the
table, mean ± std over seeds), ``study.csv``, ``study.json``, ``study.png`` and ``timings.json``
(the wall time per row, summed over the calls that worked on it). Exit codes as the
search's: 0 done, 2 bad input, 1 other failure.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import shutil
import sys
import time
from pathlib import Path

from doctune_core.logs import add_verbosity_options, show_on_console
from doctune_core.run_files import RunFiles
from doctune_core.run_layout import TIMINGS_FILE
from evaluators.readings import locked_parts, record_reading
from platform.cluster.ray_cluster import ClusterChoice
from platform.cluster.resources import InfeasibleResources
from platform.exit_codes import EXIT_BAD_INPUT, EXIT_FAILURE, EXIT_OK, UsageError
from platform.report.plots import save_png, study_bars
from platform.results.study_table import RowResult, column_label, rank_rows, write_table
from platform.rundir.layout import check_run_dir, write_atomic
from platform.rundir.timings import PhaseClock
from platform.rundir.tune_state import refuse_unreadable_state
from platform.search_path import tuner
from platform.search_path.inputs import InputsPlan, check_inputs, prepare_inputs
from platform.search_path.plans import ResolvedSearch, resolve
from platform.search_path.settling import Settled, fit_to_cluster
from platform.spec import SearchSpec, SpecError, load_spec
from platform.spec.study_rows import base_row_name, fixed_runs, table_columns, tuned_search, with_tasks

log = logging.getLogger(f"doctune.{__name__}")

RESULT_FILE = "result.json"
BASE_FILE = "base.json"  # the base model's scores on every table task
INTERPOLATED_BASE_FILE = "base_interpolated.json"  # the same converted with interpolated positions
INTERPOLATED_ROW = "base (converted, positions interpolated, untrained)"
MARKER = "study_spec.json"  # the resolved spec a study directory was started with
# a row's Tune run saved by an earlier doctune (platform.rundir.tune_state.refuse_unreadable_state)
RESTORE_ADVICE = "Finish the study with the doctune that started it, or start it again with another --run-dir"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m platform.study", description=__doc__.split("\n\n")[0])
    parser.add_argument("spec", help="a spec with a study: section (name in search_spaces/, or a path)")
    parser.add_argument("--profile", choices=("full", "local", "smoke"), default="local")
    parser.add_argument("--run-dir", type=Path, help="default: runs/<spec name> in the current directory")
    parser.add_argument("--task", action="append", default=[], help="another table task (its main score)")
    parser.add_argument(
        "--validation-only",
        action="store_true",
        help="score and show the validation parts alone: a design study that must not read the locked test parts",
    )
    add_verbosity_options(parser)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    show_on_console(args.verbosity)
    # Ctrl-C must stop the study: Tune's own handler ends the running trial "gracefully", and the
    # run would be recorded as failed and skipped by the next call. An interrupted row goes on from its
    # Tune run's saved state (a tuned row's search too: Study.trial).
    tune_handler = os.environ.get("TUNE_DISABLE_SIGINT_HANDLER")
    os.environ["TUNE_DISABLE_SIGINT_HANDLER"] = "1"
    try:
        return _main(args)
    finally:
        if tune_handler is None:
            os.environ.pop("TUNE_DISABLE_SIGINT_HANDLER")
        else:
            os.environ["TUNE_DISABLE_SIGINT_HANDLER"] = tune_handler


def _main(args: argparse.Namespace) -> int:
    try:
        spec, spec_path = load_spec(args.spec, args.profile)
        if spec.study is None:
            raise UsageError(
                f"{spec_path}: no study: section; a study needs its rows (see search_spaces/seed_study.yaml)"
            )
        _check_tasks(args.task)
        columns = table_columns(spec, args.task)
        spec = with_tasks(spec, list(dict.fromkeys(task for task, _ in columns)))
        run_dir = args.run_dir or Path.cwd() / "runs" / spec.name
        # the spec by its file's name, not its path: a study's directory (or its record of finished
        # rows, copied into another) goes on from another checkout of the same spec
        shown = "val" if args.validation_only or not spec.evaluation.locked_part else "test"
        marker = json.dumps(
            {
                "spec": spec_path.name,
                "profile": args.profile,
                "shown": shown,
                "resolved_spec": dataclasses.asdict(spec),
            },
            indent=2,
            default=str,
        )
        _check_study_dir(run_dir, marker)
        return _run(spec, spec_path, args.profile, columns, run_dir, marker, shown)
    except (SpecError, UsageError, InfeasibleResources) as err:
        print(f"doctune: error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("doctune: study interrupted; the same command continues it", file=sys.stderr)
        return EXIT_FAILURE


def _check_tasks(names: list[str]) -> None:
    from evaluators.tasks import UnknownTask, check_task_name

    for name in names:
        try:
            check_task_name(name)
        except UnknownTask as err:
            raise UsageError(f"--task: {err}") from None


def _check_study_dir(run_dir: Path, marker: str) -> None:
    """A new directory, or one this same study started (it then goes on where it stopped)."""
    if not run_dir.exists():
        check_run_dir(run_dir, resume=False)
    elif not (run_dir / MARKER).exists():
        raise UsageError(f"{run_dir} exists and holds no study ({MARKER}); choose another --run-dir")
    elif not _same_study(json.loads((run_dir / MARKER).read_text()), json.loads(marker)):
        raise UsageError(f"{run_dir} holds a study of another spec, profile or --task list; choose another --run-dir")


def _same_study(recorded, now) -> bool:
    """Whether a study directory's record describes the study ``now`` resolves to: compared as data
    (a record kept in git may have gained a final newline), a setting doctune gained since the record
    was written left out (a study goes on under a newer doctune)."""
    if isinstance(recorded, dict) and isinstance(now, dict):
        return recorded.keys() <= now.keys() and all(_same_study(v, now[k]) for k, v in recorded.items())
    return recorded == now


class Study:
    """The study's runs, in one Ray session and one evaluator pool."""

    def __init__(self, spec: SearchSpec, spec_path: Path, profile: str, run_dir: Path, inputs, cluster, tasks, shown):
        self.spec, self.spec_path, self.profile, self.run_dir = spec, spec_path, profile, run_dir
        self.inputs = inputs  # the search's inputs, prepared once for every row
        self.cluster = cluster
        self.tasks = tasks  # every table task
        self.shown = shown  # the part the table shows: "test", or "val" (--validation-only: no test part is read)

    def resolve(self, spec: SearchSpec, run_dir: Path) -> ResolvedSearch:
        settled = Settled(spec, self.profile, replaced=(), fit=None)
        resolved = resolve(settled, self.inputs, spec_path=self.spec_path, run_dir=run_dir, cluster=self.cluster)
        if self.shown == "val":
            return dataclasses.replace(resolved, evaluation=dataclasses.replace(resolved.evaluation, parts=("val",)))
        return resolved

    def score(self, resolved: ResolvedSearch, checkpoint: str, have: dict) -> dict:
        """``have`` completed with the table tasks it lacks in the shown part, scored on ``checkpoint``:
        with the test part shown, those it has on validation only (a search's rounds read no test
        part) too."""
        from evaluators.pool_calls import score_checkpoint

        missing = [t for t in self.tasks if self.shown not in have.get(t, {})]
        if not missing:
            return have
        return have | score_checkpoint(resolved.evaluation, checkpoint, resolved.fixed.pooling, missing)

    def trial(self, spec: SearchSpec, directory: Path) -> dict:
        """Run ``spec``'s search in ``directory`` (once: a finished one is read back); its best
        trial's hyperparameters and table scores, or its failure.

        A search an earlier call started goes on from Tune's saved state (its ended trials are not
        trained again; one that ended whole, the call stopped while its best trial's table scores
        were taken, is only read back); a directory without that state is started afresh."""
        from platform.results import leaderboard

        done = directory / RESULT_FILE
        if done.exists():
            return json.loads(done.read_text())
        resume = (directory / "tune" / spec.name / "tuner.pkl").exists()
        if resume:
            refuse_unreadable_state(RunFiles.at(directory), RESTORE_ADVICE)
        else:
            if directory.exists():  # stopped before its search began: nothing to keep
                shutil.rmtree(directory)
            directory.mkdir(parents=True)
        resolved = self.resolve(spec, directory)
        results = tuner.run_search(resolved, resume=resume)
        result = self.result(resolved, leaderboard.rows_from_results(results, resolved))
        write_atomic(done, json.dumps(result, indent=2))
        return result

    def result(self, resolved: ResolvedSearch, rows: list) -> dict:
        """The best of a run's ``rows`` (each one round of a trial): its hyperparameters and table
        scores, or the run's failure."""
        scored = [r for r in rows if r.objective is not None]
        if not scored:
            return {"failed": "; ".join(r.status for r in rows) or "no trial ran"}
        best = max(scored, key=lambda r: r.objective)
        return {
            "hyperparameters": best.hyperparameters,
            "objective": best.objective,
            "scores": self.score(resolved, best.checkpoint, best.scores),
        }

    def base_rows(self, pool_plan: ResolvedSearch) -> list[RowResult]:
        """The base model, untouched, on every table task (scored once); where some row starts from
        interpolated positions, the base so converted, untrained, too."""
        from doctune_core.longformer import cached_interpolated

        rows = [self.untrained_row(base_row_name(self.spec), self.inputs.model_dir, BASE_FILE, pool_plan)]
        if self.spec.may_interpolate_positions():
            interpolated = str(cached_interpolated(self.inputs.model_dir))
            rows.append(self.untrained_row(INTERPOLATED_ROW, interpolated, INTERPOLATED_BASE_FILE, pool_plan))
        return rows

    def untrained_row(self, name: str, model_dir: str, file: str, pool_plan: ResolvedSearch) -> RowResult:
        """``model_dir`` on every table task, scored once (kept in ``file``)."""
        from evaluators.pool_calls import score_checkpoint

        scored = self.run_dir / file
        if not scored.exists():
            log.info(f"doctune: study: scoring {name}")
            scores = score_checkpoint(pool_plan.evaluation, model_dir, pool_plan.fixed.pooling, self.tasks)
            write_atomic(scored, json.dumps(scores, indent=2))
        return RowResult(name, {}, {self.spec.study.seeds[0]: json.loads(scored.read_text())}, {})

    def seed_batches(self) -> list[list[int]]:
        """The study's seeds in batches of as many as the cluster trains at once. Every row trains a
        batch before any row trains the next, and each batch's results are written as it ends: a
        study stopped part-way has its rows at equal seed counts and loses at most one batch."""
        seeds, rows = self.spec.study.seeds, self.spec.study.rows
        at_once = self.resolve(fixed_runs(self.spec, next(iter(rows.values())), seeds), self.run_dir)
        size = max(1, at_once.resources.max_concurrent)
        return [seeds[i : i + size] for i in range(0, len(seeds), size)]

    def trained_seeds(self, name: str, values: dict, seeds: list[int], directory: Path) -> dict[int, dict]:
        """``values`` trained once per seed, the seeds as the trials of one Tune run in ``directory``
        (at once where the cluster allows; a seed finished by an earlier call is read back); each
        seed's hyperparameters and table scores, or its failure, by seed."""
        from platform.results import leaderboard

        done = {seed: directory / f"seed{seed}" / RESULT_FILE for seed in seeds}
        if todo := [seed for seed, path in done.items() if not path.exists()]:
            refuse_unreadable_state(RunFiles.at(directory), RESTORE_ADVICE)  # a saved run is restored below
            directory.mkdir(parents=True, exist_ok=True)
            resolved = self.resolve(fixed_runs(self.spec, values, todo), directory)
            at_once = resolved.resources.max_concurrent
            log.info(f"doctune: study: {name}, seed(s) {', '.join(map(str, todo))} ({at_once} at once)")
            # named by all of the row's seeds: a call interrupted before every seed's result was
            # written restores that run (its finished trials are not trained again) and records the rest
            results = tuner.train_seeds(resolved, {}, todo, "seeds-" + "-".join(map(str, seeds)))
            # each seed's last round: a fixed run chooses nothing on its scores
            for result, row in zip(results, leaderboard.rows_from_results(results, resolved, last_round=True)):
                if (seed := int(result.config["seed"])) in todo:
                    record = self.result(resolved, [row])
                    if self.spec.study.rounds > 1 and "failed" not in record:
                        rounds = leaderboard.round_scores(result, resolved.evaluation)
                        record["rounds"] = {str(step): scores for step, scores in sorted(rounds.items())}
                    done[seed].parent.mkdir(parents=True, exist_ok=True)
                    write_atomic(done[seed], json.dumps(record, indent=2))
        return {seed: json.loads(path.read_text()) for seed, path in done.items()}

    def tuned(self, name: str) -> RowResult:
        """Row ``name`` searched over ``search.space`` with the first seed; the winner's
        configuration then trained with the other seeds."""
        tuned_name = f"{name} (tuned)"
        row = self.spec.study.rows[name]
        first, *others = self.spec.study.seeds
        log.info(f"doctune: study: tuning {name}")
        directory = self.run_dir / "runs" / tuned_name
        runs = {first: self.trial(tuned_search(self.spec, row, first), directory / f"seed{first}")}
        if "failed" not in runs[first] and others:
            won = runs[first]["hyperparameters"]
            chosen = row | {k: won[k] for k in self.spec.search.space if k in won}
            runs |= self.trained_seeds(tuned_name, chosen, others, directory)
        return self.row(tuned_name, runs)

    def row(self, name: str, runs: dict[int, dict]) -> RowResult:
        result = RowResult(name, {}, {}, {})
        for seed, run in runs.items():
            if "failed" in run:
                result.failed[seed] = run["failed"]
            else:
                result.seeds[seed] = run["scores"]
                result.hyperparameters = run["hyperparameters"]
                if "rounds" in run:
                    result.rounds[seed] = {int(step): scores for step, scores in run["rounds"].items()}
        return result


def summed_timings(path: Path, wall_seconds: float, rows: dict[str, float]) -> dict:
    """The study's wall time, and each row's, summed over every call that worked on it: this call's
    added to what ``path`` holds (a call that finds a row finished adds about nothing to it)."""
    before = json.loads(path.read_text()) if path.exists() else {"wall_seconds": 0.0, "rows": {}, "calls": 0}
    summed = {name: before["rows"].get(name, 0.0) + seconds for name, seconds in rows.items()}
    return {
        "wall_seconds": before["wall_seconds"] + wall_seconds,
        "rows": before["rows"] | summed,
        "calls": before.get("calls", 1) + 1,  # a file from before calls were counted records one
    }


def _run(spec: SearchSpec, spec_path: Path, profile: str, columns, run_dir: Path, marker: str, shown: str) -> int:
    import ray

    from doctune_core.data import DataUnavailable
    from doctune_core.encoder import ModelUnavailable
    from trainers.base_stage import BaseStageFailed

    tasks = list(dict.fromkeys(task for task, _ in columns))
    try:
        check_inputs(InputsPlan.of(spec))
    except (ModelUnavailable, DataUnavailable) as err:
        log.error(f"doctune: error: {err}")
        return EXIT_BAD_INPUT
    cluster, _ = ClusterChoice.for_address(spec.address).join()
    spec, fit = fit_to_cluster(spec, cluster)
    if fit:
        log.info(f"doctune: {fit}")
    try:
        try:
            inputs = prepare_inputs(InputsPlan.of(spec))  # the corpus is prepared by a Ray Data job the first time
        except (ModelUnavailable, DataUnavailable, SpecError) as err:
            log.error(f"doctune: error: {err}")
            return EXIT_BAD_INPUT
        run_dir.mkdir(parents=True, exist_ok=True)
        write_atomic(run_dir / MARKER, marker)
        if spec.base is not None:  # the vanilla base: trained once, then taken from the cache
            inputs = prepare_inputs(InputsPlan.of(spec), build_base_in=run_dir)
        study = Study(spec, spec_path, profile, run_dir, inputs, cluster, tasks, shown)
        pool_plan = study.resolve(spec, run_dir)
        with tuner.evaluator_pool(pool_plan):
            clock = PhaseClock()
            try:
                with clock.phase("base row"):
                    rows = study.base_rows(pool_plan)
                runs: dict[str, dict[int, dict]] = {name: {} for name in spec.study.rows}
                for batch in study.seed_batches():
                    for name, values in spec.study.rows.items():
                        with clock.phase(name):
                            runs[name] |= study.trained_seeds(name, values, batch, run_dir / "runs" / name)
                fixed = [study.row(name, seeds) for name, seeds in runs.items()]
                tuned = []
                for name in rank_rows(fixed, pool_plan.evaluation)[: spec.study.tune_best]:
                    with clock.phase(f"{name} (tuned)"):
                        tuned.append(study.tuned(name))
                rows += fixed + tuned
                table = write_table(rows, columns, run_dir, spec, shown)
                save_png(study_bars(table, [column_label(t, m) for t, m in columns]), run_dir / "study.png")
            finally:  # an interrupted or failed call's time counts too: the next call goes on from its work
                timings = summed_timings(run_dir / TIMINGS_FILE, time.monotonic() - clock.began, clock.phases)
                write_atomic(run_dir / TIMINGS_FILE, json.dumps(timings, indent=2))
        log.info((run_dir / "study.md").read_text())
        if shown == "test":  # every reading of a locked part is entered in the ledger
            reading = record_reading(
                {t: d for r in rows for scores in r.seeds.values() for t, d in locked_parts(scores).items()},
                f"study {spec.name!r} ({profile}): its table on the locked test parts",
                run_dir,
            )
            log.info(f"doctune: the table's test scores: {reading.describe()} (ledger {reading.ledger})")
        log.info(f"doctune: study table in {run_dir}/study.md, chart in {run_dir}/study.png")
        return EXIT_OK if all(r.seeds for r in rows) else EXIT_FAILURE
    except BaseStageFailed as err:
        log.error(f"doctune: error: {err}")
        return EXIT_FAILURE
    finally:
        ray.shutdown()


if __name__ == "__main__":
    sys.exit(main())
