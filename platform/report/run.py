"""A run directory read for the report: the leaderboard, the search's record, each trial's
evaluation rounds and the Optuna study's hyperparameter importances."""

from __future__ import annotations

import io
import json
import warnings
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from doctune_core.run_files import RunFiles
from doctune_core.run_layout import LEADERBOARD_FILE, OPTUNA_JOURNAL, SEARCH_RECORD, TUNE_DIR
from evaluators.leaderboard import Leaderboard, LeaderboardRow
from platform.rundir.storage import run_files_of


class ReportError(ValueError):
    """A run directory no report can be written from; the message says what is wrong and how to fix it."""


class PlotSkipped(Exception):
    """A plot this run has no data for; the message says why."""


@dataclass(frozen=True)
class Run:
    """What the report shows, as read from a run directory."""

    path: Path
    summary: dict  # search.json
    name: str  # the search's (and its Optuna study's) name
    rows: list[LeaderboardRow]  # ranked, as leaderboard.json has them
    noise: dict | None  # the ranking's noise (platform.results.ranking), None where it was not assessed
    objectives: dict[str, dict[str, float]]  # name -> task weights; a single objective is called "objective"
    tasks: list[str]  # the leaderboard's task columns
    searched: list[str]  # the hyperparameters the search varied
    histories: dict[str, pd.DataFrame]  # trial id -> its evaluation rounds (see trial_histories)
    kept_at: str | None = None  # the storage URI the run's records were fetched from; None: read in place

    @property
    def location(self) -> str:
        """Where the run is, as the page names it: its storage URI, else its directory."""
        return self.kept_at or str(self.path.resolve())

    @property
    def spec(self) -> dict:
        return self.summary["resolved_spec"]

    @property
    def start(self) -> float | None:
        """Unix time the first trial started (the baseline, scored before it, carries no timestamp)."""
        return min((float(f["started"].min()) for f in self.histories.values()), default=None)


@dataclass(frozen=True)
class Plot:
    """One figure of the report: written to ``path``, or skipped for ``reason``."""

    title: str
    path: Path | None
    reason: str | None = None


def read_run(run_dir: Path, kept_at: str | None = None) -> Run:
    """The run directory's records, or ReportError naming what is missing; ``kept_at``: the storage
    URI they were fetched from (the page names it, not the directory)."""
    if not run_dir.is_dir():
        raise ReportError(
            f"run directory {run_dir} does not exist; name the directory a search wrote (runs/<spec name>)"
        )
    for record in (SEARCH_RECORD, LEADERBOARD_FILE):
        if not (run_dir / record).is_file():
            raise ReportError(
                f"{run_dir} holds no {record}: not a finished doctune search (a search writes its leaderboard "
                "when it ends; an interrupted one continues with python -m platform.search SPEC --resume)"
            )
    try:
        board = Leaderboard.read(run_dir)
        rows, noise = list(board.rows), board.noise
        summary = json.loads((run_dir / SEARCH_RECORD).read_text())
        spec = summary["resolved_spec"]
        objective = spec["search"]["objective"]
        objectives = objective.get("objectives") or {"objective": objective["tasks"]}
        # the objectives' tasks, the report-only ones, then any other task a row was scored on
        named = [t for weights in objectives.values() for t in weights] + spec["evaluation"].get("report_tasks", [])
        tasks = list(dict.fromkeys(named + [t for row in rows for t in row.scores]))
        name, searched = str(spec["name"]), list(spec["search"]["space"])
    except (KeyError, TypeError, ValueError) as err:
        raise ReportError(
            f"{run_dir}: {LEADERBOARD_FILE} or {SEARCH_RECORD} is not one this doctune wrote "
            f"({type(err).__name__}: {err})"
        ) from None
    # the search's own experiment, where the search kept it (a copy an earlier doctune made at kept_at
    # holds it too); a confirmation's (tune/<name>-confirm) re-runs the winner and is no trial
    files = RunFiles.at(kept_at) if kept_at else run_files_of(run_dir)
    try:
        histories = trial_histories(files, f"{TUNE_DIR}/{name}")
    except OSError as err:
        raise ReportError(f"reading Tune's logs in {files.uri} failed ({str(err).splitlines()[0]})") from None
    return Run(run_dir, summary, name, rows, noise, objectives, tasks, searched, histories, kept_at)


TRIAL_LOGS = ("result.json", "progress.csv")  # Tune's log of a trial's rounds, in the trial's directory


def trial_histories(files: RunFiles, experiment: str) -> dict[str, pd.DataFrame]:
    """Each trial's evaluation rounds, from Tune's per-trial logs under ``experiment`` in the run's files.

    A frame per trial id with columns ``timestamp`` (Unix seconds of the report), ``objective`` and
    ``started`` (the trial's start, ``timestamp - time_total_s``), in time order. ``result.json``
    (JSON lines) is read where present, else ``progress.csv``; rounds without an objective are
    dropped, and so are trials left with none.
    """
    logs: dict[str, set[str]] = {}
    for relative in files.listing(experiment):
        trial_dir, _, name = relative.rpartition("/")
        if name in TRIAL_LOGS:
            logs.setdefault(trial_dir, set()).add(name)
    frames: dict[str, list[pd.DataFrame]] = {}
    for trial_dir, names in sorted(logs.items()):
        log = "result.json" if "result.json" in names else "progress.csv"
        frame = _read_trial_log(files.read(f"{experiment}/{trial_dir}/{log}"), log)
        if frame is None or "objective" not in frame or "timestamp" not in frame:
            continue
        frame = frame.dropna(subset=["objective", "timestamp"])
        if frame.empty:
            continue
        trial = str(frame["trial_id"].iloc[-1]) if "trial_id" in frame else trial_dir.rpartition("/")[2]
        total = frame["time_total_s"].fillna(0) if "time_total_s" in frame else 0.0
        frames.setdefault(trial, []).append(
            pd.DataFrame(
                {
                    "timestamp": frame["timestamp"].astype(float),
                    "objective": frame["objective"].astype(float),
                    "started": frame["timestamp"].astype(float) - total,
                }
            )
        )
    return {
        trial: pd.concat(parts).sort_values("timestamp", kind="stable").reset_index(drop=True)
        for trial, parts in frames.items()
    }


def _read_trial_log(data: bytes, name: str) -> pd.DataFrame | None:
    if name == "result.json":
        records = []
        for line in data.decode().splitlines():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:  # a search killed mid-write leaves a partial last line
                continue
        return pd.DataFrame.from_records(records) if records else None
    try:
        return pd.read_csv(io.BytesIO(data))
    except (pd.errors.EmptyDataError, pd.errors.ParserError):
        return None


def param_importances(run_dir: Path, study_name: str) -> dict[str, float]:
    """Optuna's importance of each searched hyperparameter for the (first) objective, read from the
    Optuna study the search kept in ``run_dir``; PlotSkipped where there is too little to judge from."""
    if not (run_dir / OPTUNA_JOURNAL).is_file():
        raise PlotSkipped(f"the run directory holds no {OPTUNA_JOURNAL} (no Optuna study was kept)")
    import optuna
    from optuna.trial import TrialState

    from platform.strategies.optuna_base import optuna_storage

    try:
        optuna_study = optuna.load_study(study_name=study_name, storage=optuna_storage(run_dir))
    except KeyError:
        raise PlotSkipped(f"{OPTUNA_JOURNAL} holds no Optuna study named {study_name!r}") from None
    complete = optuna_study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    if len(complete) < 2:
        raise PlotSkipped(f"the Optuna study has {len(complete)} completed trial(s); importance needs at least 2")
    names = {name for trial in complete for name in trial.params}
    if not any(len({trial.params.get(name) for trial in complete}) > 1 for name in names):
        raise PlotSkipped("no hyperparameter took more than one value in the completed trials")
    if len(optuna_study.directions) == 1:
        importances = optuna.importance.get_param_importances(optuna_study)
    else:
        # several objectives need a target: the first, which ranks. Optuna's default evaluator
        # (PED-ANOVA) then reads low values as good, so a maximised objective is negated.
        sign = -1.0 if optuna_study.directions[0] == optuna.study.StudyDirection.MAXIMIZE else 1.0
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="PedAnovaImportanceEvaluator computes the importances")
            importances = optuna.importance.get_param_importances(optuna_study, target=lambda t: sign * t.values[0])
    return {name: float(value) for name, value in importances.items()}
