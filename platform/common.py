"""What every command shares: exit codes, the run directory's checks, Ray's start-up and the
search's inputs (the base encoder and the prepared corpus), so ``search``, ``study``, ``report``
and ``export`` behave alike.

Exit codes: 0 success, 2 bad input (one message naming what is wrong and how to fix it; nothing
started), 1 any other failure.
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
import tempfile
from pathlib import Path

from core.data.atomic import atomic_file
from platform.resources import LARGEST_NODE_GPUS

ROOT = Path(__file__).resolve().parent.parent
EXIT_OK, EXIT_FAILURE, EXIT_BAD_INPUT = 0, 1, 2
STUDY_FILE = "optuna.journal"  # the search's Optuna study (``optuna-dashboard RUN_DIR/optuna.journal``)
TUNE_DIR = "tune"  # Tune's experiments, in the run's files: tune/<spec name>/<trial directory>/


class UsageError(ValueError):
    """Bad command-line input (run directory, flags)."""


def new_directory_problem(option: str, to: Path) -> str | None:
    """Why ``to`` (given as ``option``) cannot receive a command's output, or None: it must be a new
    or empty directory whose nearest existing parent is writable."""
    target = to.resolve()
    if target.is_file() or (target.is_dir() and any(target.iterdir())):
        return f"{option} {to} exists and is not an empty directory; name a new directory, or empty that one"
    parent = next(p for p in [target, *target.parents] if p.exists())
    if not os.access(parent, os.W_OK):
        return f"{option} {to}: {parent} is not writable; name a directory elsewhere"
    return None


def check_run_dir(run_dir: Path, resume: bool) -> None:
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


def write_atomic(path: Path, text: str) -> None:
    """``text`` as the whole of ``path``, replaced in one rename (``core.data.atomic``)."""
    with atomic_file(path, "w", encoding="utf-8") as handle:
        handle.write(text)


def recorded_address_if_alive(temp_dir: str | None = None) -> str | None:
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


# a Ray this process starts: its GCS may take this long to listen, its dashboard agent to register
LOCAL_RAY_START_LIMITS = {"RAY_gcs_server_port_wait_time_s": "120", "RAY_agent_register_timeout_ms": "120000"}
WORKERS_START_TIMEOUT_S = "1800"  # for a resumed search, and on a cluster an autoscaler grows


def ray_init(address: str | None, trials_may_wait: bool = False, log_to_driver: bool = True) -> dict[str, float]:
    """Start or join Ray with doctune's runtime environment; the cluster's resources.
    ``trials_may_wait``: Tune may start trials past what runs at once (a resumed experiment, PBT
    restarting the trials it paused), so their worker groups wait for the trials ahead.
    ``log_to_driver``: print the workers' output here (off for a dry run, whose standard output is
    its plan as JSON: on a running cluster, Ray's forwarded lines would otherwise follow it)."""
    import ray

    os.environ.setdefault("RAY_TRAIN_HEALTH_CHECK_INTERVAL_S", "0.5")  # default 2 s caps short trials
    env_vars = {
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        "RAY_TRAIN_HEALTH_CHECK_INTERVAL_S": os.environ["RAY_TRAIN_HEALTH_CHECK_INTERVAL_S"],
        "TOKENIZERS_PARALLELISM": "false",
    }
    address = address or os.environ.get("RAY_ADDRESS")
    for name, value in os.environ.items():  # DOCTUNE_CACHE, and the tests' fault injection
        if name in ("HF_HUB_OFFLINE", "HF_HOME") or name.startswith("DOCTUNE_"):
            env_vars[name] = value
    # every worker process asks Ray's state API about its own cluster (core.nodes.pin_ray_address)
    runtime_env: dict = {"env_vars": env_vars, "worker_process_setup_hook": "core.nodes.pin_ray_address"}
    if "RAY_JOB_CONFIG_JSON_ENV_VAR" in os.environ:
        # inside `ray job submit --working-dir .`: the job's working directory reaches every node,
        # and these env_vars join the job's runtime env (Ray refuses a driver's that repeats a field)
        env_vars.pop("PYTHONPATH")
        os.environ["RAY_OVERRIDE_JOB_RUNTIME_ENV"] = "1"
    elif not address:
        address = recorded_address_if_alive()
    elif address not in ("local", "auto"):  # "local" starts a Ray here, "auto" joins this node's
        # a remote cluster from a laptop: ship the project (not the venv or runs) to every node
        env_vars.pop("PYTHONPATH")
        runtime_env["working_dir"] = str(ROOT)
        runtime_env["excludes"] = [".venv", "runs", ".git", "bench/out"]
    own = starts_its_own_ray(address)  # asked once a stale address record is cleared
    if own:  # on a busy machine Ray's own start-up limits (30 s, 15 s) fail the node before it is up
        for name, value in LOCAL_RAY_START_LIMITS.items():
            os.environ.setdefault(name, value)
    if trials_may_wait or not own:
        # Tune restarts every unfinished trial of a restored experiment (and PBT every trial it paused)
        # at once, past the concurrency limit, and on a cluster an autoscaler grows the plan counts
        # nodes not launched yet: either
        # way trials wait for workers. Their wait would end after Ray Train's 60 s start-up timeout
        # (four tries) and error the trial; the resources were checked feasible when the search
        # started, so they wait for the trials ahead, or for the nodes to come up, instead
        env_vars["RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S"] = WORKERS_START_TIMEOUT_S
    ray.init(address=address, runtime_env=runtime_env, logging_level="WARNING", log_to_driver=log_to_driver)
    if own:
        warn_of_another_ray()
    cluster = {k: float(v) for k, v in ray.cluster_resources().items()}
    node_gpus = [node["Resources"].get("GPU", 0.0) for node in ray.nodes() if node["Alive"]]
    cluster[LARGEST_NODE_GPUS] = float(max(node_gpus, default=0.0))
    return cluster


def warn_of_another_ray() -> None:
    """One warning when another Ray runs on this machine beside the one this search started: Ray
    Train's placement-group cleaner, which frees a stopped or paused trial's workers, asks for "the"
    Ray of the machine and fails when there are two, so those resources stay held until the search ends."""
    from ray._private.services import find_gcs_addresses

    if len(find_gcs_addresses()) > 1:
        print(
            "doctune: warning: another Ray runs on this machine; trials that stop early or pause (ASHA, PBT) "
            "may then keep their resources until the search ends (Ray Train cannot tell the two apart). "
            "Run one search at a time, or start one Ray (ray start --head) and run both on it.",
            file=sys.stderr,
            flush=True,
        )


def starts_its_own_ray(address: str | None) -> bool:
    """Whether ``ray_init`` will start a Ray on this machine rather than join one."""
    from ray._private.utils import read_ray_address

    address = address or os.environ.get("RAY_ADDRESS")
    if "RAY_JOB_CONFIG_JSON_ENV_VAR" in os.environ:
        return False
    return address == "local" or (address is None and not read_ray_address())


def prepare_inputs(spec, build_base_in: Path | None = None, plan_only: bool = False, through_storage: bool = False):
    """The base model directory (converted to a Longformer if the spec asks), the prepared corpus,
    and the base model directory before any conversion. Needs Ray when the corpus is not prepared
    yet (preparation is a Ray Data job): call it after ``ray_init``, and ``check_inputs`` before.

    With ``base:`` the base model is the vanilla base trained for this corpus and these settings:
    trained (or taken from the cache) when ``build_base_in`` names the run directory, which needs
    Ray and receives the stage's TensorBoard events; otherwise only its cache directory is named.

    A base without a masked-LM head, in a search where some trial may weight an MLM term, is
    replaced by the same encoder with a head trained for it here, in this process, on the corpus
    (``trainers.mlm_head``, cached); a head no better than the unigram baseline raises
    ``MlmHeadUnavailable`` (a ``ModelUnavailable``: bad input). With ``plan_only`` (``--dry-run``)
    a head not in the cache yet is only named, as a base not trained yet is. ``through_storage``:
    the trials receive the inputs through the run's storage (``trainers.inputs``), so the nodes
    need not see this machine's cache once the corpus is prepared.
    """
    from core.data import cache_dir, prepare_corpus
    from core.encoder import embedding_length, resolve_model
    from core.longformer import cached_longformer
    from trainers.base_stage import base_entry, ensure_base
    from trainers.mlm_head import ensure_mlm_head, mlm_head_entry

    model_dir = resolve_model(spec.base_model) if spec.base is None else None
    corpus = prepare_corpus(spec.corpus.source, spec.corpus.max_documents, read_in_place=not through_storage)
    check_corpus_suits_recipes(spec, corpus.stats)
    if spec.base is not None and build_base_in is None:
        model_dir = str(base_entry(spec.base, corpus.directory))
    elif spec.base is not None:
        train = spec.train
        built = ensure_base(
            spec.base,
            corpus.directory,
            spec.corpus.source,
            workers=train.workers,
            cpus_per_worker=train.cpus_per_worker,
            gpus_per_worker=train.gpus_per_worker,
            bf16=train.bf16,
            max_worker_failures=train.max_worker_failures,
            logs_to=build_base_in / "base",
        )
        model_dir = str(built.path)
    if needs_mlm_head(spec, model_dir):
        max_length = embedding_length(model_dir, spec.train.max_length)
        entry = mlm_head_entry(model_dir, corpus.directory, spec.mlm_head, max_length, spec.train.seed)
        if plan_only and not entry.is_dir():
            print(f"doctune: MLM head for {spec.base_model} (not trained yet: a run trains it first): {entry}")
            model_dir = str(entry)
        else:
            model_dir = str(
                ensure_mlm_head(
                    model_dir,
                    corpus.directory,
                    spec.mlm_head,
                    max_length=max_length,
                    seed=spec.train.seed,
                    base_name=spec.base_model,
                    corpus_name=spec.corpus.source,
                ).path
            )
    source_model = model_dir  # the baseline row: the head's directory holds the base's encoder unchanged
    longformer = spec.backbone.longformer
    if longformer is not None and Path(model_dir).is_dir():  # a base not trained yet is converted once it is
        model_dir = str(cached_longformer(model_dir, longformer.max_length, longformer.attention_window, cache_dir()))
        print(
            f"doctune: Longformer backbone from {spec.base_model} ({longformer.max_length} positions, "
            f"window {longformer.attention_window}): {model_dir}"
        )
    return model_dir, corpus, source_model


def needs_mlm_head(spec, model_dir: str) -> bool:
    """Whether ``prepare_inputs`` trains a masked-LM head for the base in ``model_dir``: some trial
    may weight an MLM term and the base carries no head (a base not trained yet will: the base
    stage trains one)."""
    from core.encoder import has_mlm_head

    return spec.may_weight_mlm() and Path(model_dir).is_dir() and not has_mlm_head(model_dir)


def check_inputs(spec) -> None:
    """What can be checked of the inputs before Ray starts: the base model resolves, the corpus
    source exists in a format doctune reads. Raises ``ModelUnavailable`` or ``DataUnavailable``."""
    from core.data import check_source
    from core.encoder import resolve_model

    if spec.base is None:
        resolve_model(spec.base_model)
    check_source(spec.corpus.source)


def check_corpus_suits_recipes(spec, stats) -> None:
    """Each recipe the search may train refuses a corpus it cannot train on (``Recipe.corpus_problem``)."""
    from core.data import DataUnavailable
    from trainers.pairs import RECIPES

    for recipe in spec.recipes():
        if problem := RECIPES[recipe]().corpus_problem(stats):
            raise DataUnavailable(f"corpus {spec.corpus.source!r}: {problem}")
