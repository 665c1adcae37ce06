from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

import pytest

from doctune_core.run_files import RunFiles
from evaluators.readings import READINGS_ENV
from platform.cluster.ray_cluster import LOCAL_RAY_START_LIMITS

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # no test may reach a model hub
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Every Ray a test starts is its own: never a cluster this node runs or once ran (`ray start`
# records its address, and a record left by a killed Ray would make ray.init() wait forever).
os.environ["RAY_ADDRESS"] = "local"
# A Ray started while the other lane of scripts/test.sh keeps both CPUs busy can take over Ray's
# default 30 s to publish its GCS port (120 s is what Ray itself allows a GCS on RocksDB), and its
# dashboard agent over the 15 s a raylet waits for it (the node then never comes up): the limits a
# search gives the Ray it starts, for every Ray a test starts (``ray start`` nodes included).
for name, value in LOCAL_RAY_START_LIMITS.items():
    os.environ.setdefault(name, value)
# No reading of a locked test part a test makes lands in the ledger beside the user's cache
# (evaluators/readings.py): the suite's go to a ledger of its own; a test that counts them names its own.
_SUITE_LEDGER = Path(tempfile.mkdtemp(prefix="doctune-suite-readings-"))
os.environ[READINGS_ENV] = str(_SUITE_LEDGER / "readings.jsonl")

ROOT = Path(__file__).resolve().parent.parent
SHARED_IR = ROOT.parent / "shared" / "data" / "ir"
# evaluation limits below the smoke profile's, for searches that show something runs and resumes,
# not how well it ranks (the smoke spec's own search is ranked on the profile's parts)
# long-document tasks (docsplit_long's objective) at one short haystack length, 6 needles a part
FEW_ITEMS = {
    "max_documents": 30,
    "max_queries": 16,
    "max_test": 32,
    "fewshot_k": 4,
    "repeats": 2,
    "long_length": 256,
    "long_queries": 6,
    "max_train": 64,  # pair and full-probe training examples
}


def pytest_configure(config: pytest.Config) -> None:
    """SIGTERM interrupts the run as Ctrl-C does, so that fixtures stop the Ray nodes they started in
    sessions of their own (scripts/test.sh stops its lower-priority lane with SIGTERM)."""

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(_SUITE_LEDGER, ignore_errors=True)


@pytest.hookimpl(tryfirst=True)  # before `-m` selects on the markers
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that starts Ray is slow too: ``-m "not slow"`` stays the quick tier."""
    for item in items:
        if item.get_closest_marker("ray") is not None:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def console_output():
    """Each test sees doctune's output as the command line shows it (``doctune_core.logs.show_on_console``:
    progress on stdout, warnings on stderr, for capsys); the ``doctune`` logger is put back after."""
    import logging

    from doctune_core.logs import LOGGER, show_on_console

    logger = logging.getLogger(LOGGER)
    kept = (logger.handlers[:], logger.level, logger.propagate)
    show_on_console(0)
    yield
    logger.handlers[:], logger.level, logger.propagate = kept


def closed_port() -> int:
    """A local port nothing listens on (a tracking server that is down)."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def shared_collection(name: str) -> Path:
    """A retrieval collection from the developers' shared data; tests that need it skip without it."""
    path = SHARED_IR / name
    if not (path / "corpus.jsonl").exists():
        pytest.skip(f"the shared retrieval collection {name!r} is absent ({path}); it is development data only")
    return path


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """A real S3-compatible server (moto) up for the module's tests, with a bucket ``runs``."""
    from tests.servers import s3_server  # it imports this module's helpers

    with s3_server(tmp_path_factory.mktemp("s3")) as server:
        server.create_bucket("runs")
        yield server


@pytest.fixture(params=["directory", "bucket"])
def run_files(request, tmp_path) -> RunFiles:
    """A run's files (``doctune_core.run_files``) in a directory, and in a bucket of a real S3 server."""
    if request.param == "directory":
        return RunFiles.at(tmp_path / "run")
    return RunFiles.at(request.getfixturevalue("s3").uri("runs", tmp_path.name))


@pytest.fixture(scope="session")
def minilm_dir() -> str:
    from doctune_core.encoder import resolve_model

    return resolve_model("all-minilm-l6-v2")


@pytest.fixture(scope="session")
def default_corpus() -> Path:
    """The default search's corpus (docsplit_long at its full profile) in doctune's cache, prepared,
    if it is not yet, by a Ray of this machine's own CPUs: a dry run on a cluster of declared CPUs
    would prepare it with a Ray Data worker per CPU that is not there."""
    return prepared_here("docsplit_long", "full")


def prepared_here(spec: str, profile: str) -> Path:
    """``spec``'s corpus at ``profile`` in doctune's cache, prepared, if it is not yet, by a Ray of
    this machine's own (a cluster's Ray Data workers would write its shards on their own nodes)."""
    from doctune_core.data import cache_dir
    from platform.spec import load_spec

    corpus = load_spec(spec, profile)[0].corpus
    prepare = (
        "import json, sys; from doctune_core.data import prepare_corpus; "
        "print(prepare_corpus(sys.argv[1], json.loads(sys.argv[2])).directory)"
    )
    done = subprocess.run(
        [sys.executable, "-c", prepare, corpus.source, json.dumps(corpus.max_documents)],
        cwd=ROOT, capture_output=True, text=True, timeout=900,
        env=os.environ | {"RAY_ADDRESS": "local", "DOCTUNE_CACHE": str(cache_dir())},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return Path(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def minilm_with_mlm_head(minilm_dir, tmp_path_factory) -> str:
    """all-MiniLM-L6-v2 with a masked-LM head trained for it (``trainers.mlm_head``) at the smoke
    profile's size on the packaged news text: the base a trial with an MLM term loads (seconds, no Ray)."""
    from doctune_core.data.news import pretraining_articles
    from platform.spec import BUILTIN_PROFILES
    from trainers.config import MlmHeadSettings
    from trainers.mlm_head import train_mlm_head

    smoke = BUILTIN_PROFILES["smoke"]
    target = tmp_path_factory.mktemp("mlm_head") / "model"
    texts = (article.text for article in pretraining_articles())
    train_mlm_head(minilm_dir, texts, MlmHeadSettings(**smoke["mlm_head"]), smoke["train"]["max_length"], 0, target)
    return str(target)


def documented_plugins() -> dict[str, str]:
    """The worked example of docs/plugins.md, each file's path (the backticked name opening the
    paragraph before its code) -> its code."""
    text = (ROOT / "docs" / "plugins.md").read_text()
    return dict(re.findall(r"^`([\w/]+\.py)`.*?```python\n(.*?)```", text, flags=re.S | re.M))


def plugin_package(directory: Path, module: str, group: str, code: str) -> Path:
    """A package of its own (``doctune-<module>``), outside doctune, whose one module ``module`` holds
    ``code`` and is named by an entry point of ``group`` (``doctune.recipes``...): what a user's
    plug-in package is. Returns its project directory, for ``pip install``."""
    project = directory / f"doctune-{module.replace('_', '-')}"
    (project / module).mkdir(parents=True)
    (project / module / "__init__.py").write_text(code)
    (project / "pyproject.toml").write_text(
        f"""[build-system]
requires = ["setuptools>=77"]
build-backend = "setuptools.build_meta"

[project]
name = "doctune-{module.replace("_", "-")}"
version = "0.1.0"

[project.entry-points."{group}"]
{module} = "{module}"
"""
    )
    return project


def written_corpus(directory: Path, documents: list[list[str]], rows_per_group: int = 2):
    """A ``PreparedCorpus`` of ``documents`` (each its sentences; an empty one is an empty row)
    written as preparation writes one, in one shard of ``rows_per_group``-row groups, without Ray."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from doctune_core.data.corpus import CorpusStats, PreparedCorpus, RowGroup

    directory.mkdir(parents=True, exist_ok=True)
    table = pa.table({"sentences": pa.array(documents, type=pa.list_(pa.string()))})
    pq.write_table(table, directory / "part-000000.parquet", row_group_size=rows_per_group)
    groups = pq.ParquetFile(directory / "part-000000.parquet").metadata.num_row_groups
    row_groups = tuple(
        RowGroup("part-000000.parquet", i, min(rows_per_group, len(documents) - i * rows_per_group))
        for i in range(groups)
    )
    stats = CorpusStats(sum(1 for d in documents if d), sum(map(len, documents)), 0, 0, 0, 0)
    return PreparedCorpus(directory, stats, row_groups, hashlib.sha256(json.dumps(documents).encode()).hexdigest())


def spec_variant(name: str, directory: Path, **changes) -> str:
    """The shipped spec ``name`` with ``changes`` ({"train.steps": 6, ...}) applied to it and to its
    own smoke-profile overrides (so the built-in smoke profile does not undo them), written to
    ``directory``; returns the file's path. Its reference rows are off unless ``changes`` turns them
    on: the suite scores them in the shared smoke search only."""
    from platform.spec import write_variant

    changes = {"evaluation.references": False, **changes}
    return str(write_variant(name, directory, changes, profiles=("smoke",)))


def recorded_search(run_dir: Path, profile: str = "smoke", storage: str | None = None, earlier: bool = False) -> Path:
    """``run_dir``'s search.json as a search of the shipped smoke spec at ``profile`` records it, kept
    at ``storage``; ``earlier``: as an earlier doctune, which copied the run directory there, did.
    Returns ``run_dir``."""
    import dataclasses

    from platform.spec import find_spec_file, parse_spec, read_raw

    spec = parse_spec(read_raw(find_spec_file("smoke")), profile)
    record = {"spec": "smoke", "profile": profile, "storage": storage, "resolved_spec": dataclasses.asdict(spec)}
    if not earlier:
        record["run_files"] = storage or str(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "search.json").write_text(json.dumps(record, default=str))
    return run_dir


def trial_rows(rows: list[dict]) -> list[dict]:
    """The rows of ``leaderboard.json`` a trial trained (not a baseline, not a reference)."""
    return [r for r in rows if not r["trial"].startswith(("baseline", "reference"))]


def smoke_search_command(spec: str | Path, run_dir: Path) -> list[str]:
    """The CLI's command for ``spec``'s search at the smoke profile, run in ``run_dir``."""
    return [sys.executable, "-m", "platform.search", str(spec), "--profile", "smoke", "--run-dir", str(run_dir)]


def patched_search_env(
    env: dict[str, str] | None = None,
    *,
    nan_at_step: int | None = None,
    nan_trial_suffix: str = "",
    gpus_declared_only: bool = False,
) -> dict[str, str]:
    """``env`` (by default this process's environment) for a search whose every process loads
    ``tests/patched_workers``: a trial's loss NaN at ``nan_at_step`` (in trials whose id ends with
    ``nan_trial_suffix``), GPUs that are only declared trained on as the CPU."""
    from tests.patched_workers import sitecustomize as patches

    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "tests" / "patched_workers"), env.get("PYTHONPATH")]))
    if nan_at_step is not None:
        env |= {patches.NAN_AT_STEP: str(nan_at_step), patches.NAN_TRIAL_SUFFIX: nan_trial_suffix}
    if gpus_declared_only:
        env[patches.GPUS_DECLARED_ONLY] = "1"
    return env


def run_smoke_search(
    spec: str | Path, run_dir: Path, *args: str, env: dict | None = None, cwd: Path = ROOT, timeout: int = 900
) -> subprocess.CompletedProcess:
    """``smoke_search_command`` (and ``args``) run to its end, its output captured as text."""
    command = [*smoke_search_command(spec, run_dir), *args]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def _torch_cpu_sources() -> list[str]:
    """Where ``uv`` finds torch's CPU build: pip's configured find-links (a machine that holds the
    wheel), else PyTorch's CPU index where it answers within 5 s."""
    import urllib.request

    config = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
    links = [line.split("=", 1)[1].strip("'\"") for line in config.splitlines() if "find-links=" in line]
    links += os.environ.get("PIP_FIND_LINKS", "").split()
    if links:
        return [arg for link in dict.fromkeys(links) for arg in ("--find-links", link)]
    try:
        urllib.request.urlopen(f"{TORCH_CPU_INDEX}/torch/", timeout=5)
    except OSError:
        return []
    return ["--extra-index-url", TORCH_CPU_INDEX]


@pytest.fixture(scope="session")
def installed_doctune(tmp_path_factory) -> Path:
    """A fresh virtual environment built from the CPU lock alone (every package checked against its
    hashes, nothing resolved, nothing from this environment) with a wheel of the checkout installed
    into it, not editable; its bin directory. ``uv`` installs the lock (pip takes minutes over the
    same files; ``scripts/setup.sh`` uses pip, which every Python has)."""
    where = tmp_path_factory.mktemp("install")
    wheels, env_dir = where / "wheels", where / "venv"
    build = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(wheels)]
    subprocess.run([*build, str(ROOT)], check=True, capture_output=True, timeout=300)
    venv.EnvBuilder(with_pip=True).create(env_dir)
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or "uv"
    install = [uv, "pip", "install", "--quiet", "--python", str(env_dir / "bin" / "python")]
    lock = [*install, "--require-hashes", "--no-deps", "-r", str(ROOT / "locks" / "cpu.txt"), *_torch_cpu_sources()]
    subprocess.run(lock, check=True, timeout=1800)
    (wheel,) = wheels.glob("doctune-*.whl")
    subprocess.run([*install, "--no-deps", str(wheel)], check=True, timeout=300)
    return env_dir / "bin"


def outside_the_checkout(command: list, cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    """``command`` run in ``cwd`` as from a shell outside the checkout: no PYTHONPATH, no active venv."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
