"""The search in MLflow (``tracking: {mlflow: {tracking_uri: ...}}``): one run for the search, one
nested run per trial (MLflow's ``mlflow.parentRunId`` tag), the winner as a registered model.

Runs are written through ``MlflowClient`` with explicit run ids, never MLflow's active-run stack, so
rounds of trials running at once cannot land in each other's runs. The ids are kept in the run
directory's ``tracking.json``; a resumed search reopens the same runs and skips every round at or
before the last step it logged for a trial.

The winner is logged as an ``mlflow.pyfunc`` model from code (``encoder_model.py``, with ``best/`` as
its artifact): ``mlflow.pyfunc.load_model("models:/<experiment>/<version>").predict(texts)`` embeds
as ``best/`` does in sentence-transformers, which loads it without doctune installed.
"""

from __future__ import annotations

import json
import os
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from doctune_core.fields import constraint, leaves
from doctune_core.run_layout import SEARCH_RECORD
from evaluators.references import winner as winner_of
from platform.spec.trackers import TRACKERS
from platform.tracking.base import (
    SEARCH_ARTIFACTS,
    TrackerState,
    chosen_round_scores,
    search_settings,
)

MODEL_CODE = Path(__file__).parent.parent / "encoder_model.py"
MODEL_REQUIREMENTS = ["sentence-transformers>=3", "transformers", "torch"]
# MLflow takes at most 100 params (and 1000 metrics) in one batch, each param value at most 6000 characters
PARAMS_PER_BATCH = 100
METRICS_PER_BATCH = 1000
PARAM_CHARACTERS = 6000
# a server that does not answer fails fast instead of after MLflow's minutes of retries; no progress bars
MLFLOW_SETTINGS = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "10",
    "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false",
}
PROBE_TIMEOUT_S = 5


def flat_params(tree: dict) -> dict[str, str]:
    """Nested settings as MLflow params: ``{"train": {"steps": 4}}`` -> ``{"train.steps": "4"}``;
    lists and empty mappings as JSON, every value cut to what MLflow stores."""
    return {
        name: (value if isinstance(value, str) else json.dumps(value, default=str))[:PARAM_CHARACTERS]
        for name, value in leaves(tree).items()
    }


@dataclass(frozen=True)
class MlflowTracking:
    """``tracking: {mlflow: {tracking_uri: ...}}``: the search a run, each trial a nested run with its
    hyperparameters and every round's validation scores; test scores once, at the end, for the chosen
    round; the winner a model."""

    tracking_uri: str = field(
        metadata=constraint(
            "where MLflow keeps runs: a server (http://host:5000) or a local store (sqlite:///mlflow.db, relative "
            "to the working directory)"
        )
    )
    experiment: str | None = field(default=None, metadata=constraint("the MLflow experiment; default: the spec's name"))
    artifact_location: str | None = field(
        default=None,
        metadata=constraint(
            "where a new experiment keeps its artifacts (a directory or bucket URI); default: MLflow's own, beside a "
            "local store or the server's"
        ),
    )
    register_model: bool = field(
        default=True,
        metadata=constraint("register the winner (best/) in the model registry under the experiment's name"),
    )


@TRACKERS.register("mlflow")
class MlflowRuns:
    """The MLflow tracker (``platform.tracking.base.Tracker``)."""

    settings = MlflowTracking
    package = "mlflow"
    install = "pip install 'mlflow-skinny>=3.4' (or doctune's mlflow extra)"

    def __init__(self, settings: MlflowTracking, spec_name: str, run_dir: Path) -> None:
        self.config = settings
        self.experiment = settings.experiment or spec_name
        self.state = TrackerState(run_dir, "mlflow")
        self._client = None

    def __getstate__(self) -> dict:  # Tune pickles its callbacks with the experiment: no live client
        return {**self.__dict__, "_client": None}

    def describe(self) -> str:
        return f"MLflow tracking at {self.config.tracking_uri}"

    @property
    def client(self):
        if self._client is None:
            for name, value in MLFLOW_SETTINGS.items():
                os.environ.setdefault(name, value)
            uri = self.config.tracking_uri
            if uri.startswith(("http://", "https://")):  # one short probe before any of MLflow's retries
                urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=PROBE_TIMEOUT_S).close()
            from mlflow import MlflowClient

            self._client = MlflowClient(tracking_uri=uri)
        return self._client

    # tracking.json: {"mlflow": {"experiment_id", "search_run", "trial_runs": {trial: run}, "steps": {trial: step},
    # "finished": bool}}
    def start(self, spec: dict, profile: str, run_dir: Path) -> None:
        state = self.state.load()
        if "search_run" in state:  # a resumed search: the same runs go on
            return
        experiment = self.client.get_experiment_by_name(self.experiment)
        if experiment is not None:
            experiment_id = experiment.experiment_id
        else:
            experiment_id = self.client.create_experiment(
                self.experiment, artifact_location=self.config.artifact_location
            )
        tags = {"doctune.run_dir": str(run_dir), "doctune.profile": profile}
        run = self.client.create_run(experiment_id, run_name=f"{spec['name']} ({run_dir.name})", tags=tags)
        self._log_params(run.info.run_id, flat_params(search_settings(spec, profile)))
        if (run_dir / SEARCH_RECORD).is_file():  # the resolved spec and the environment, from the start
            self.client.log_artifact(run.info.run_id, str(run_dir / SEARCH_RECORD))
        self.state.save({"experiment_id": experiment_id, "search_run": run.info.run_id, "trial_runs": {}, "steps": {}})

    def round(self, trial: str, hyperparameters: dict, step: int, metrics: dict[str, float]) -> None:
        state = self.state.load()
        if step <= state["steps"].get(trial, -1):  # logged before a kill: a resumed trial reports it again
            return
        run_id = self._trial_run(state, trial, hyperparameters)
        self._log_metrics(run_id, metrics, step)
        state["steps"][trial] = step
        self.state.save(state)

    def _trial_run(self, state: dict, trial: str, hyperparameters: dict) -> str:
        if trial not in state["trial_runs"]:
            tags = {"mlflow.parentRunId": state["search_run"], "doctune.trial": trial}
            # made before a kill that came before its id was saved: the resumed search goes on in it
            found = self.client.search_runs(
                [state["experiment_id"]],
                filter_string=" and ".join(f"tags.`{key}` = '{value}'" for key, value in tags.items()),
            )
            run = found[0] if found else self.client.create_run(state["experiment_id"], run_name=trial, tags=tags)
            run_id = run.info.run_id
            if not run.data.params:
                self._log_params(run_id, flat_params(hyperparameters))
            state["trial_runs"][trial] = run_id
            self.state.save(state)
        return state["trial_runs"][trial]

    def finish(self, rows: list, run_dir: Path, best_dir: Path | None) -> None:
        state = self.state.load()
        if "search_run" not in state or state.get("finished"):
            return
        for row in rows:
            logged_rounds = row.trial in state["steps"]
            run_id = self._trial_run(state, row.trial, row.hyperparameters)
            self._log_chosen_round(run_id, row, logged_rounds)
            # a row with no score failed; BM25's reference row has scores but no objective (no probe)
            self.client.set_terminated(run_id, status="FINISHED" if row.scores else "FAILED")
        search_run = state["search_run"]
        if (winner := winner_of(rows)) is not None:
            self.client.set_tag(search_run, "doctune.winner", winner.trial)
            self._log_metrics(search_run, {"objective": winner.objective, "test_objective": winner.test_objective}, 0)
        for name in SEARCH_ARTIFACTS:
            path = run_dir / name
            if path.is_dir():
                self.client.log_artifacts(search_run, str(path), artifact_path=name)
            elif path.is_file():
                self.client.log_artifact(search_run, str(path))
        if best_dir is not None and (best_dir / "modules.json").exists():
            self._log_model(search_run, best_dir)
        self.client.set_terminated(search_run)
        self.state.save(state | {"finished": True})

    def _log_chosen_round(self, run_id: str, row, logged_rounds: bool) -> None:
        """The test scores of the row's chosen round, logged this once at that round's step; a row
        whose rounds were never logged (a baseline) gets its validation scores too."""
        metrics = chosen_round_scores(row, logged_rounds)
        self._log_metrics(run_id, metrics, row.step or 0)
        self.client.set_tag(run_id, "doctune.status", row.status[:PARAM_CHARACTERS])
        if row.step is not None:
            self.client.set_tag(run_id, "doctune.chosen_step", str(row.step))

    def _log_model(self, search_run: str, best_dir: Path) -> None:
        """The winner as a pyfunc model from code, logged from the search's run (and registered)."""
        import mlflow

        mlflow.set_tracking_uri(self.config.tracking_uri)
        with mlflow.start_run(run_id=search_run):  # log_model writes into the active run
            info = mlflow.pyfunc.log_model(
                name="encoder",
                python_model=str(MODEL_CODE),
                artifacts={"encoder": str(best_dir)},
                pip_requirements=MODEL_REQUIREMENTS,
                registered_model_name=self.experiment if self.config.register_model else None,
            )
        if info.registered_model_version is not None:
            self.client.set_tag(
                search_run, "doctune.registered_model", f"{self.experiment}/{info.registered_model_version}"
            )

    def _log_params(self, run_id: str, params: dict[str, str]) -> None:
        from mlflow.entities import Param

        items = [Param(key, value) for key, value in params.items()]
        for start in range(0, len(items), PARAMS_PER_BATCH):
            self.client.log_batch(run_id, params=items[start : start + PARAMS_PER_BATCH])

    def _log_metrics(self, run_id: str, metrics: dict, step: int) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        items = [Metric(key, float(value), now, step) for key, value in metrics.items() if value is not None]
        for start in range(0, len(items), METRICS_PER_BATCH):
            self.client.log_batch(run_id, metrics=items[start : start + METRICS_PER_BATCH])
