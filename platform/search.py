"""``python -m platform.search SPEC [--profile full|local|smoke] [--run-dir DIR] [--resume] [--dry-run]``

Runs one hyperparameter search. Exit codes: 0 success, 2 bad input (one message naming what
is wrong and how to fix it; nothing started), 1 any other failure.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import sys
import tempfile
from pathlib import Path

from evaluators.noise import Gain
from platform.resources import InfeasibleResources
from platform.spec import PROFILES, SpecError, load_spec
from platform.timings import PhaseClock

ROOT = Path(__file__).resolve().parent.parent
EXIT_OK, EXIT_FAILURE, EXIT_BAD_INPUT = 0, 1, 2


class UsageError(ValueError):
    """Bad command-line input (run directory, flags)."""


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m platform.search", description=__doc__.split("\n\n")[1])
    parser.add_argument("spec", help="a spec file, or a spec name in search_spaces/ (with or without .yaml)")
    parser.add_argument(
        "--profile",
        choices=PROFILES,
        help="full (GPU cluster), local (2 CPUs, within 15 min), smoke (minutes); "
        "default: full when the cluster has GPUs, else local",
    )
    parser.add_argument("--run-dir", type=Path, help="default: runs/<spec name>")
    parser.add_argument("--resume", action="store_true", help="continue the search in an existing run dir")
    parser.add_argument("--dry-run", action="store_true", help="validate, plan and print; start no trial")
    return parser.parse_args(argv)


def _check_run_dir(run_dir: Path, resume: bool) -> None:
    if run_dir.exists() and not resume:
        raise UsageError(
            f"run directory {run_dir} already exists: pass --resume to continue that search, "
            "or --run-dir to start a new one elsewhere"
        )
    if resume and not (run_dir / "search.json").exists():
        raise UsageError(f"--resume: {run_dir} holds no search to resume (no search.json); drop --resume")
    probe_dir = run_dir if run_dir.exists() else next(p for p in run_dir.resolve().parents if p.exists())
    try:  # a real write: permission bits alone say nothing for root, read-only mounts or /proc
        with tempfile.TemporaryFile(dir=probe_dir):
            pass
    except OSError as err:
        raise UsageError(
            f"run directory {run_dir}: cannot write in {probe_dir} ({err.strerror}); choose another --run-dir"
        ) from None
    free = shutil.disk_usage(probe_dir).free
    if free < 1 << 30:
        raise UsageError(
            f"run directory {run_dir}: only {free >> 20} MiB free on its disk; checkpoints need "
            "at least 1 GiB; free space or choose another --run-dir"
        )


def _recorded_address_if_alive(temp_dir: str | None = None) -> str | None:
    """``"local"`` when the Ray this node last started (``ray start`` records its address in
    ``<ray temp dir>/ray_current_cluster``) no longer answers, else None (Ray's own lookup, which
    joins that cluster). ``ray stop`` deletes the record; a Ray killed any other way (a reboot, an
    OOM kill, a killed session) leaves it, and ``ray.init()`` would then wait on a GCS that is gone
    instead of starting its own. The stale record is removed, as ``ray stop`` would have: Ray's
    own processes read it too (Ray Train's placement-group cleaner waits 12 s per trial on it)."""
    from ray._private.utils import get_ray_address_file, read_ray_address

    recorded = read_ray_address(temp_dir)
    if not recorded:
        return None
    host, _, port = recorded.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=2):
            return None
    except (OSError, ValueError):
        record = Path(get_ray_address_file(temp_dir))
        record.unlink(missing_ok=True)
        print(
            f"doctune: note: no Ray answers at {recorded}, the address {record} recorded (a Ray stopped "
            "without `ray stop`); removed the record and starting a local Ray",
            file=sys.stderr,
        )
        return "local"


RESUMED_START_TIMEOUT_S = "1800"


def _ray_init(address: str | None, resume: bool = False) -> dict[str, float]:
    import ray

    os.environ.setdefault("RAY_TRAIN_HEALTH_CHECK_INTERVAL_S", "0.5")  # default 2 s caps short trials
    env_vars = {
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        "RAY_TRAIN_HEALTH_CHECK_INTERVAL_S": os.environ["RAY_TRAIN_HEALTH_CHECK_INTERVAL_S"],
        "TOKENIZERS_PARALLELISM": "false",
    }
    if resume:
        # Tune restarts every unfinished trial of a restored experiment at once, past the concurrency
        # limit; where the cluster fits fewer, the rest wait for workers. Their wait would end after
        # Ray Train's 60 s start-up timeout (four tries) and error the trial; the resources were
        # checked feasible when the search started, so they wait for the trials ahead instead
        env_vars["RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S"] = RESUMED_START_TIMEOUT_S
    for passthrough in ("HF_HUB_OFFLINE", "DOCTUNE_CACHE", "HF_HOME"):
        if passthrough in os.environ:
            env_vars[passthrough] = os.environ[passthrough]
    address = address or os.environ.get("RAY_ADDRESS")
    runtime_env: dict = {"env_vars": env_vars}
    if "RAY_JOB_CONFIG_JSON_ENV_VAR" in os.environ:
        # inside `ray job submit --working-dir .`: the job's working directory reaches every node,
        # and these env_vars join the job's runtime env (Ray refuses a driver's that repeats a field)
        env_vars.pop("PYTHONPATH")
        os.environ["RAY_OVERRIDE_JOB_RUNTIME_ENV"] = "1"
    elif not address:
        address = _recorded_address_if_alive()
    elif address not in ("local", "auto"):  # "local" starts a Ray here, "auto" joins this node's
        # a remote cluster from a laptop: ship the project (not the venv or runs) to every node
        env_vars.pop("PYTHONPATH")
        runtime_env["working_dir"] = str(ROOT)
        runtime_env["excludes"] = [".venv", "runs", ".git", "bench/out"]
    ray.init(address=address, runtime_env=runtime_env, logging_level="WARNING", log_to_driver=True)
    return {k: float(v) for k, v in ray.cluster_resources().items()}


def main(argv: list[str] | None = None) -> int:
    clock = PhaseClock()
    args = parse_args(argv)
    try:
        spec, spec_path = load_spec(args.spec, args.profile or "local")
        run_dir = args.run_dir or ROOT / "runs" / spec.name
        _check_run_dir(run_dir, args.resume)
        return _run(args, spec_path, run_dir, clock)
    except (SpecError, UsageError, InfeasibleResources) as err:
        print(f"doctune: error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("doctune: interrupted; continue with --resume", file=sys.stderr)
        return EXIT_FAILURE


def _run(args: argparse.Namespace, spec_path: Path, run_dir: Path, clock: PhaseClock) -> int:
    from platform import export, report, runner
    from platform.timings import trial_seconds, write_timings
    from trainers.base import BaseStageFailed
    from trainers.data import DataUnavailable
    from trainers.encoder import ModelUnavailable

    chosen_profile = _check_before_ray(args, spec_path, run_dir)
    spec, _ = load_spec(str(spec_path), args.profile or chosen_profile or "local")
    try:
        with clock.phase("inputs"):
            model_dir, corpus, source_model = _prepare_inputs(spec)
    except (ModelUnavailable, DataUnavailable) as err:
        print(f"doctune: error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT

    import ray

    with clock.phase("ray start"):
        cluster = _ray_init(spec.address, args.resume)
    try:
        profile = args.profile or (chosen_profile if args.resume else None)
        if profile is None:
            profile = "full" if cluster.get("GPU", 0) > 0 else "local"
            why = "the cluster has GPUs" if profile == "full" else "the cluster has no GPU"
            print(f"doctune: profile {profile!r} ({why}; choose with --profile)")
            spec, _ = load_spec(str(spec_path), profile)
            if profile == "full":  # the full profile may change the corpus or the backbone
                model_dir, corpus, source_model = _prepare_inputs(spec)
        resolved = runner.resolve(spec, spec_path, profile, run_dir, model_dir, corpus, cluster, source_model)
        summary = resolved.summary()
        if args.dry_run:
            if spec.base is not None:
                state = "cached" if Path(model_dir).is_dir() else "not trained yet: a run trains it first"
                print(f"doctune: base {spec.base.label} ({state}): {model_dir}")
            print(json.dumps(summary, indent=2, default=str))
            return EXIT_OK
        if args.resume:
            recorded = json.loads((run_dir / "search.json").read_text())
            if recorded["resolved_spec"] != json.loads(json.dumps(summary["resolved_spec"], default=str)):
                raise UsageError(
                    f"--resume: the spec or profile differs from the one {run_dir} was started with "
                    f"({recorded['spec']}, profile {recorded['profile']!r})"
                )
        else:
            run_dir.mkdir(parents=True)
            _write_atomic(run_dir / "search.json", json.dumps(summary, indent=2, default=str))
        if spec.base is not None:  # trained (or taken from the cache) now that Ray runs and the run is recorded
            with clock.phase("base stage"):
                model_dir, corpus, source_model = _prepare_inputs(spec, build_base_in=run_dir)
            resolved = runner.resolve(spec, spec_path, profile, run_dir, model_dir, corpus, cluster, source_model)
        searched = spec.search.space.get("recipe")
        recipes = ", ".join(searched.values) if searched else spec.recipe
        print(f"doctune: search {spec.name!r}, profile {profile!r}, recipe {recipes}, run dir {run_dir}")
        stats = resolved.corpus_stats
        print(
            f"doctune: corpus {spec.corpus.source!r}: {stats.documents} documents, {stats.sentences} sentences "
            f"({stats.single_sentence_documents} single-sentence, {stats.dropped_empty} empty dropped, "
            f"{stats.truncated} truncated, {stats.replaced_invalid_utf8} with invalid UTF-8 replaced)"
        )
        with clock.phase("evaluators start"):
            evaluators = runner.start_evaluators(resolved)  # noqa: F841 - held so the actors live
        baseline, results = runner.run_search(resolved, args.resume, clock)
        if not runner.finished(results):
            raise KeyboardInterrupt
        tasks = list(resolved.plan.evaluation.tasks)
        rows = report.rows_from_results(results, resolved)
        scored = [r for r in rows if r.objective is not None]
        if scored and resolved.plan.evaluation.report_tasks:
            with clock.phase("report-only tasks"):
                _score_report_tasks(scored, resolved)
        columns = tasks + list(resolved.plan.evaluation.report_tasks)
        baselines = report.baseline_rows(baseline, resolved)
        rows = report.write_leaderboard([*baselines, *rows], run_dir, columns)
        if scored:
            with clock.phase("noise"):
                _compare_with_baselines(report.winner(rows), baselines, resolved)
            if spec.search.confirm_seeds:
                with clock.phase("confirmation"):
                    report.winner(rows).confirmation = runner.confirm_winner(resolved, report.winner(rows))
            rows = report.write_leaderboard(rows, run_dir, columns)
        print("\n" + report.format_table(rows, columns) + "\n")
        if not scored:
            print("doctune: no trial produced a score; see the statuses above", file=sys.stderr)
            return EXIT_FAILURE
        best = report.winner(rows)
        exported = export.export_best(best, run_dir)
        print(
            f"doctune: best trial {best.trial} (validation objective {best.objective:.4f}, test objective "
            f"{best.test_objective:.4f}) exported to {exported.path}"
        )
        for against, gain in best.gains.items():
            print(f"doctune: test objective of {best.trial} over {against}: {Gain.from_record(gain).describe()}")
        if best.confirmation:
            stats = best.confirmation["test_objective"]
            spread = f" ± {stats['std']:.4f} (mean ± std)" if stats["std"] is not None else " (the other seeds failed)"
            seeds = f"{best.trial}'s configuration over {stats['n']} training seeds"
            print(f"doctune: {seeds}: test objective {stats['mean']:.4f}{spread}")
        if exported.sentence_transformers_gap:
            print(f"doctune: {exported.path} has no sentence-transformers files: {exported.sentence_transformers_gap}")
        print(f"doctune: leaderboard in {run_dir}/leaderboard.csv; TensorBoard: tensorboard --logdir {run_dir}")
        try:  # the leaderboard and best/ are written: a report that fails loses nothing and fails no search
            from platform.html_report import write_reports

            print(f"doctune: report in {write_reports(run_dir)[-1]}")
        except Exception as err:
            print(f"doctune: report not written: {type(err).__name__}: {err}", file=sys.stderr)
        print(f"doctune: {write_timings(run_dir, clock.summary(trial_seconds(results)))}")
        return EXIT_OK
    except (ModelUnavailable, DataUnavailable) as err:  # inputs of the auto-selected profile
        print(f"doctune: error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BaseStageFailed as err:
        print(f"doctune: error: {err}", file=sys.stderr)
        return EXIT_FAILURE
    finally:
        ray.shutdown()


REPORT_TOP_TRIALS = 3  # trials scored on the report-only tasks, beside the baseline


def _check_before_ray(args: argparse.Namespace, spec_path: Path, run_dir: Path) -> str | None:
    """What can be refused before Ray starts, so bad input starts nothing. ``--resume``: the spec
    and profile must be the ones the run was started with (a resumed search keeps its recorded
    profile unless ``--profile`` names one); returns that profile. A search that starts its own
    local Ray: the resources it asks for must fit this machine (a running cluster's can only be
    read once Ray is up, and are checked then)."""
    import dataclasses

    from platform.resources import plan_resources

    profile = args.profile
    if args.resume:
        recorded = json.loads((run_dir / "search.json").read_text())
        profile = profile or recorded["profile"]
        spec, _ = load_spec(str(spec_path), profile)
        if recorded["resolved_spec"] != json.loads(json.dumps(dataclasses.asdict(spec), default=str)):
            raise UsageError(
                f"--resume: the spec or profile differs from the one {run_dir} was started with "
                f"({recorded['spec']}, profile {recorded['profile']!r})"
            )
    spec, _ = load_spec(str(spec_path), profile or "local")
    if _starts_its_own_ray(spec.address):
        import torch

        machine = {"CPU": float(os.cpu_count() or 1), "GPU": float(torch.cuda.device_count())}
        if profile is None:  # the choice the driver makes once Ray is up, from the same GPUs
            profile = "full" if machine["GPU"] > 0 else "local"
            spec, _ = load_spec(str(spec_path), profile)
        plan_resources(spec.train, spec.evaluation, spec.search.samples, spec.search.max_concurrent, machine)
    return profile


def _starts_its_own_ray(address: str | None) -> bool:
    """Whether ``_ray_init`` will start a Ray on this machine rather than join one."""
    from ray._private.utils import read_ray_address

    address = address or os.environ.get("RAY_ADDRESS")
    if "RAY_JOB_CONFIG_JSON_ENV_VAR" in os.environ:
        return False
    return address == "local" or (address is None and not read_ray_address())


def _compare_with_baselines(best, baselines, resolved) -> None:
    """Set ``best.gains``: the winner's test objective against each baseline row's, with a paired
    bootstrap over the same test items (``evaluators.noise``), so the leaderboard says whether the
    gain is beyond noise."""
    from evaluators.noise import paired_bootstrap
    from evaluators.pool import CheckpointMissing, checkpoint_outcomes

    evaluation = resolved.plan.evaluation
    weights = next(iter(evaluation.objectives.values()))  # the ranking objective

    def outcomes(row):
        return checkpoint_outcomes(evaluation, row.checkpoint, row.hyperparameters["pooling"], list(weights), "test")

    print(f"doctune: comparing {best.trial} with the baseline rows on the test items (paired bootstrap)", flush=True)
    try:
        mine = outcomes(best)
        for baseline in baselines:
            gain = paired_bootstrap(mine, outcomes(baseline), weights)
            best.gains[baseline.trial] = gain.record()
    except (CheckpointMissing, RuntimeError) as err:  # the leaderboard, best/ and the report still follow
        best.status += f"; not compared with the baselines: {err}"


def _score_report_tasks(scored, resolved) -> None:
    """Score the best trials on the tasks that never steered the search (the baseline already
    has them), so the report shows whether the winners generalise beyond their objective."""
    from evaluators.pool import CheckpointMissing, score_checkpoint

    evaluation = resolved.plan.evaluation
    print(f"doctune: scoring the top {REPORT_TOP_TRIALS} trials on the report-only tasks", flush=True)
    for row in sorted(scored, key=lambda r: r.objective, reverse=True)[:REPORT_TOP_TRIALS]:
        try:
            row.scores |= score_checkpoint(
                evaluation, row.checkpoint, row.hyperparameters["pooling"], list(evaluation.report_tasks)
            )
        except CheckpointMissing as err:
            row.status += f"; report-only tasks not scored: {err}"


def _prepare_inputs(spec, build_base_in: Path | None = None):
    """The base model directory (converted to a Longformer if the spec asks), the prepared corpus,
    and the base model directory before any conversion.

    With ``base:`` the base model is the vanilla base trained for this corpus and these settings:
    trained (or taken from the cache) when ``build_base_in`` names the run directory, which needs
    Ray and receives the stage's TensorBoard events; otherwise only its cache directory is named.
    """
    from trainers.base import base_entry, ensure_base
    from trainers.data import cache_dir, prepare_corpus
    from trainers.encoder import resolve_model
    from trainers.longformer import cached_longformer

    model_dir = resolve_model(spec.base_model) if spec.base is None else None
    corpus = prepare_corpus(spec.corpus.source, spec.corpus.max_documents)
    _check_corpus_suits_recipes(spec, corpus[1])
    if spec.base is not None and build_base_in is None:
        model_dir = str(base_entry(spec.base, corpus[0]))
    elif spec.base is not None:
        train = spec.train
        built = ensure_base(
            spec.base,
            corpus[0],
            spec.corpus.source,
            workers=train.workers,
            cpus_per_worker=train.cpus_per_worker,
            gpus_per_worker=train.gpus_per_worker,
            bf16=train.bf16,
            max_worker_failures=train.max_worker_failures,
            logs_to=build_base_in / "base",
        )
        model_dir = str(built.path)
    source_model = model_dir
    longformer = spec.backbone.longformer
    if longformer is not None and Path(model_dir).is_dir():  # a base not trained yet is converted once it is
        model_dir = str(cached_longformer(model_dir, longformer.max_length, longformer.attention_window, cache_dir()))
        print(
            f"doctune: Longformer backbone from {spec.base_model} ({longformer.max_length} positions, "
            f"window {longformer.attention_window}): {model_dir}"
        )
    return model_dir, corpus, source_model


def _check_corpus_suits_recipes(spec, stats) -> None:
    """DocSplit needs documents of two or more sentences; a corpus with none cannot train it."""
    from trainers.data import DataUnavailable

    searched = spec.search.space.get("recipe")
    recipes = searched.values if searched else (spec.recipe,)
    if "docsplit" in recipes and stats.single_sentence_documents == stats.documents:
        raise DataUnavailable(
            f"corpus {spec.corpus.source!r}: all {stats.documents} documents are a single sentence, and docsplit "
            "splits a document's sentences into two views; use documents of several sentences, or another recipe"
        )


def _write_atomic(path: Path, text: str) -> None:
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False) as handle:
        handle.write(text)
    os.replace(handle.name, path)


if __name__ == "__main__":
    sys.exit(main())
