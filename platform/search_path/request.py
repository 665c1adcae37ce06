"""What the command line asks of a search (``SearchRequest``): the spec file read and validated under
every profile, the run directory checked, and for ``--resume`` the run's own record (``search.json``),
fetched from its storage first where this machine lacks it (``fetch_run``), and its saved Tune state
checked readable. A resumed search is held to the spec it started with (``check_matches_recording``)."""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from doctune_core.run_files import RunFiles
from doctune_core.run_layout import SEARCH_RECORD
from platform.exit_codes import UsageError
from platform.rundir.layout import check_run_dir
from platform.rundir.storage import RunStorage, copied_by_an_earlier_doctune, refuse_earlier_copy
from platform.rundir.tune_state import refuse_unreadable_state
from platform.spec import Replacement, SearchSpec, find_spec_file, parse_profiles, profile_replacements, read_raw

log = logging.getLogger(f"doctune.{__name__}")


def _jsonable(value) -> object:
    """``value`` as it reads back from JSON (what ``search.json`` holds)."""
    return json.loads(json.dumps(value, default=str))


@dataclass(frozen=True)
class SearchRequest:
    """What the command line asks for: a spec file (read, validated per profile on demand), a run
    directory (checked), ``--profile`` and, for ``--resume``, the run's own record."""

    spec_path: Path
    raw: dict
    profiles: dict[str, SearchSpec]  # the spec validated under every profile, parsed once (``parse_profiles``)
    run_dir: Path
    asked_profile: str | None
    recorded: dict | None  # search.json of the run being resumed
    storage: RunStorage | None = None  # where the run is kept (``--storage``, or where the resumed run was)

    @classmethod
    def from_command_line(
        cls,
        spec: str,
        profile: str | None,
        run_dir: Path | None,
        resume: bool,
        storage_uri: str | None = None,
        resume_if_started: bool = False,
        validation_only: bool = False,
    ) -> SearchRequest:
        """``resume_if_started``: resume when the run directory (or the storage) holds a search, else
        start one: the command a scheduler retries as it is (a RayJob's ``backoffLimit``, a requeued
        Slurm job). ``validation_only``: no locked test part read (``evaluation.locked_part`` false)."""
        spec_path = find_spec_file(spec)
        raw = read_raw(spec_path)
        profiles = parse_profiles(raw)  # the spec itself and every profile's overrides, validated once
        if validation_only:
            profiles = {name: validation_only_spec(spec) for name, spec in profiles.items()}
        name = profiles[profile or "local"].name
        run_dir = run_dir or Path.cwd() / "runs" / name
        storage = RunStorage.open(storage_uri) if storage_uri else None
        if resume_if_started:
            resume = (run_dir / SEARCH_RECORD).exists() or (storage is not None and storage.holds_run())
        if storage and resume and not (run_dir / SEARCH_RECORD).exists():
            # the spec is checked against the storage's record before the driver's records are fetched
            def check(found: dict) -> SearchSpec:
                return cls(spec_path, raw, profiles, run_dir, profile, found).provisional_spec()

            fetch_run(storage, run_dir, check)
        check_run_dir(run_dir, resume)
        recorded = json.loads((run_dir / SEARCH_RECORD).read_text()) if resume else None
        if recorded and copied_by_an_earlier_doctune(recorded):
            if storage:
                raise refuse_earlier_copy(f"--storage {storage.uri}", recorded)
            log.info(
                f"doctune: note: {run_dir} was copied to {recorded['storage']} by an earlier doctune; it goes on "
                "here alone, and that copy is no longer updated",
            )
        elif recorded:
            storage = _storage_of(recorded, storage, run_dir)
        if storage:
            storage.check_holds(run_dir, resume)
        if recorded:  # a run an earlier doctune saved is refused before anything starts
            commit = recorded.get("environment", {}).get("git_commit") or "not recorded"
            refuse_unreadable_state(
                storage or RunFiles.at(recorded.get("run_files") or run_dir),
                f"Finish it with the doctune that started it (commit {commit}), or search again in a new run "
                "directory; python -m platform.report and python -m platform.export still read this run",
            )
        return cls(spec_path, raw, profiles, run_dir, profile, recorded, storage)

    @property
    def resume(self) -> bool:
        return self.recorded is not None

    def provisional_spec(self) -> SearchSpec:
        """The spec for the profile known before the cluster is: enough for its address and inputs.
        A resumed search knows its profile already, so a changed spec is refused here, before Ray."""
        if self.resume:
            return self.spec_for(self.asked_profile or self.recorded_profile)
        return self.profiles[self.asked_profile or "local"]

    @property
    def recorded_profile(self) -> str | None:
        return self.recorded["profile"] if self.recorded else None

    def replacements(self, profile: str) -> list[Replacement]:
        """The values this spec sets that ``profile``'s built-in overrides replace."""
        return profile_replacements(self.raw, profile)

    def spec_for(self, profile: str) -> SearchSpec:
        spec = self.profiles[profile]
        if self.recorded is not None:
            spec = check_matches_recording(spec, self.recorded, self.run_dir)
        return spec


def _storage_of(recorded: dict, asked: RunStorage | None, run_dir: Path) -> RunStorage | None:
    """A resumed run's storage: the one it was started with (its trials are there), which ``--storage``
    may name again but not change (``UsageError``)."""
    kept = recorded.get("storage")
    if asked is not None and asked.uri != kept:
        where, how = (kept, f"with --storage {kept}, or without --storage") if kept else (run_dir, "without --storage")
        raise UsageError(
            f"--storage {asked.uri}: this run keeps its trials and Tune's records in {where}, where its search "
            f"started; resume it {how}"
        )
    if asked is not None or not kept:
        return asked
    try:
        return RunStorage.open(kept)
    except UsageError as err:
        raise UsageError(f"{err} (the storage {run_dir}/{SEARCH_RECORD} records, which holds its trials)") from None


def fetch_run(storage: RunStorage, run_dir: Path, check: Callable[[dict], object]) -> None:
    """For ``--resume --storage URI`` on a machine without the run: the driver's records into ``run_dir``, once
    ``check`` accepted the storage's ``search.json`` (it raises otherwise). Fetched beside ``run_dir``
    and renamed when whole, so an interrupted fetch leaves no run directory behind."""
    if not storage.holds_run():
        raise UsageError(
            f"--resume: neither {run_dir} nor {storage.uri} holds a search (no {SEARCH_RECORD}); "
            "check both, or drop --resume to start one"
        )
    if run_dir.exists() and any(run_dir.iterdir()):
        raise UsageError(f"--resume: {run_dir} is not a run directory, and not empty: name another --run-dir")
    recorded = json.loads(storage.read(SEARCH_RECORD))
    if copied_by_an_earlier_doctune(recorded):
        raise refuse_earlier_copy(f"--resume --storage {storage.uri}", recorded)
    check(recorded)
    fetching = run_dir.with_name(f".{run_dir.name}.fetching")
    shutil.rmtree(fetching, ignore_errors=True)
    try:
        files = storage.pull_driver_records(fetching)
    except OSError as err:
        shutil.rmtree(fetching, ignore_errors=True)
        raise UsageError(
            f"--resume: fetching the run from {storage.uri} failed ({str(err).splitlines()[0]}); nothing was "
            "kept: run the command again"
        ) from None
    if run_dir.exists():
        run_dir.rmdir()
    fetching.rename(run_dir)
    log.info(f"doctune: fetched the run's records from {storage.uri} into {run_dir} ({files} files)")


def validation_only_spec(spec: SearchSpec) -> SearchSpec:
    """``spec`` reading no locked test part (``--validation-only``)."""
    return dataclasses.replace(spec, evaluation=dataclasses.replace(spec.evaluation, locked_part=False))


def check_matches_recording(spec: SearchSpec, recorded: dict, run_dir: Path) -> SearchSpec:
    """``spec`` as the run in ``run_dir`` was started with it (``UsageError`` when it differs). A
    resumed search keeps what its ``auto`` resources were fitted to: the worker count (its
    checkpoints hold one stream position per worker), the evaluators' GPUs and the workers' share;
    and a search started with ``--validation-only`` stays so without the option repeated."""
    started = recorded["resolved_spec"]
    if not started.get("evaluation", {}).get("locked_part", True):
        spec = validation_only_spec(spec)
    if spec.train.workers == "auto":
        spec = dataclasses.replace(spec, train=dataclasses.replace(spec.train, workers=started["train"]["workers"]))
    if spec.evaluation.gpus_per_evaluator == "auto":
        share, worker_share = started["evaluation"]["gpus_per_evaluator"], started["train"]["gpus_per_worker"]
        train = spec.train
        if train.gpus_per_worker == 1 and math.isclose(worker_share, 1 - spec.evaluation.evaluators * share):
            train = dataclasses.replace(train, gpus_per_worker=worker_share)  # what the fit gave the workers
        spec = dataclasses.replace(
            spec, train=train, evaluation=dataclasses.replace(spec.evaluation, gpus_per_evaluator=share)
        )
    if spec.evaluation.cpus_per_evaluator == "auto":
        cpus, threads = started["evaluation"]["cpus_per_evaluator"], started["evaluation"]["threads"]
        evaluation = dataclasses.replace(spec.evaluation, cpus_per_evaluator=cpus, threads=threads)
        spec = dataclasses.replace(spec, evaluation=evaluation)
    if recorded["resolved_spec"] != _jsonable(dataclasses.asdict(spec)):
        raise UsageError(
            f"--resume: the spec or profile differs from the one {run_dir} was started with "
            f"({recorded['spec']}, profile {recorded['profile']!r})"
        )
    return spec
