"""The search in Weights & Biases (``tracking: {wandb: {project: ..., mode: online|offline}}``): the
search one run (job type ``search``), each trial and baseline one run (job type ``trial``), all in
one W&B group named after the search and its run directory; the winner a model artifact.

W&B has no nested runs: a group is how a project shows the runs that belong together. Every run has
an id chosen here and kept in the run directory's ``tracking.json``, so a resumed search continues
the same runs (online; offline, the resumed part is a second run file with the same id, which
``wandb sync`` joins to the first) and skips every round at or before the last step it logged for a
trial. W&B writes its run file every second here (``FLUSH_SECONDS``; 15 s by default): a search
killed together with W&B's service loses the rounds of its last second, which tracking.json
already counts as logged.

A trial's rounds are its run's history, at the trial's step: the validation objective and scores,
losses and tokens/s. Its test scores go into the run's summary once the search is over, for the
round its leaderboard row chose (``chosen_step``): W&B's history only moves forward in steps, and
the summary is where a run's final values live. The search's run gets the leaderboard, the report,
the plots and ``search.json`` as an artifact, and the winner's ``best/`` as a ``model`` artifact
(aliases ``best`` and ``latest``), loadable by sentence-transformers once downloaded.

All runs live in the driver (the Tune callback hands it every round), several open at once
(``reinit="create_new"``); the open ones are kept by id in this module, since Tune may copy its
callbacks.
"""

from __future__ import annotations

import os
import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from doctune_core.fields import constraint
from evaluators.references import winner as winner_of
from platform.spec.trackers import TRACKERS
from platform.tracking.base import (
    SEARCH_ARTIFACTS,
    TrackerState,
    chosen_round_scores,
    search_settings,
)

INIT_TIMEOUT_S = 15  # a W&B server that does not answer fails the tracker, not the search, this soon
FLUSH_SECONDS = 1.0  # how often W&B writes a run's records to its file (x_transaction_log_flush_interval)
_OPEN: dict[str, object] = {}  # run id -> the open wandb Run, in this (the driver's) process


def use_own_service() -> None:
    """Make this process start a W&B service of its own rather than use one it inherited
    (``WANDB_SERVICE``, which W&B sets for the children of a process that used it: a notebook, a
    test runner). An inherited service outlives the search, so a killed search's runs stay open in
    it and the resumed search cannot open them again. Called by the search's driver at its start."""
    os.environ.pop("WANDB_SERVICE", None)


def artifact_name(text: str) -> str:
    """A W&B artifact name: letters, digits, dashes, underscores and dots only."""
    return re.sub(r"[^A-Za-z0-9_.]+", "-", text).strip("-") or "search"


@dataclass(frozen=True)
class WandbTracking:
    """``tracking: {wandb: {project: ..., mode: online or offline}}``: the search a run and each trial a
    run of one W&B group, with its hyperparameters and every round's validation scores; test scores in
    each run's summary, for the chosen round; the winner a model artifact."""

    project: str = field(metadata=constraint("the W&B project"))
    mode: Literal["online", "offline"] = field(
        default="online",
        metadata=constraint(
            "online: to the W&B server (its API key from `wandb login` or WANDB_API_KEY); offline: run files only, "
            "uploaded later with `wandb sync`"
        ),
    )
    entity: str | None = field(default=None, metadata=constraint("the W&B team or user; default: the key's own"))
    dir: str | None = field(
        default=None, metadata=constraint("where W&B writes its run files (a `wandb/` folder); default: the run dir")
    )


@TRACKERS.register("wandb")
class WandbRuns:
    """The Weights & Biases tracker (``platform.tracking.base.Tracker``)."""

    settings = WandbTracking
    package = "wandb"
    install = "pip install 'wandb==0.31.0' (or doctune's wandb extra)"

    def __init__(self, settings: WandbTracking, spec_name: str, run_dir: Path) -> None:
        self.config = settings
        self.dir = Path(settings.dir) if settings.dir else Path(run_dir)
        self.state = TrackerState(run_dir, "wandb")

    def describe(self) -> str:
        return f"W&B tracking ({self.config.mode}, project {self.config.project})"

    # tracking.json: {"wandb": {"group", "search_run", "trial_runs": {trial: id}, "steps": {trial: step},
    # "finished": bool}}
    def start(self, spec: dict, profile: str, run_dir: Path) -> None:
        state = self.state.load()
        if "search_run" in state:  # a resumed search: the same runs go on
            if not state.get("finished"):
                self._run(state["search_run"], state["group"], "search", state["group"], {})
            return
        group = f"{spec['name']} ({run_dir.name})"
        search_run = uuid.uuid4().hex[:12]
        self._run(search_run, group, "search", group, search_settings(spec, profile))
        self.state.save({"group": group, "search_run": search_run, "trial_runs": {}, "steps": {}})

    def round(self, trial: str, hyperparameters: dict, step: int, metrics: dict[str, float]) -> None:
        state = self.state.load()
        if step <= state["steps"].get(trial, -1):  # logged before a kill: a resumed trial reports it again
            return
        # committed now: with a step and no commit W&B holds the row until a later step arrives, so a
        # trial's last round would wait for its run's end, and be lost with a killed search
        self._trial_run(state, trial, hyperparameters).log(metrics, step=step, commit=True)
        state["steps"][trial] = step
        self.state.save(state)

    def finish(self, rows: list, run_dir: Path, best_dir: Path | None) -> None:
        import wandb

        state = self.state.load()
        if "search_run" not in state or state.get("finished"):
            return
        for row in rows:
            logged_rounds = row.trial in state["steps"]
            run = self._trial_run(state, row.trial, row.hyperparameters)
            run.summary.update(chosen_round_scores(row, logged_rounds))
            run.summary.update({"status": row.status, **({"chosen_step": row.step} if row.step is not None else {})})
            self._close(run, failed=not row.scores)  # BM25's reference row: scores, no objective
        search = self._run(state["search_run"], state["group"], "search", state["group"], {})
        if (winner := winner_of(rows)) is not None:
            search.summary.update(
                {"winner": winner.trial, "objective": winner.objective, "test_objective": winner.test_objective}
            )
        files = wandb.Artifact(artifact_name(f"{state['group']}-search"), type="search")
        for name in SEARCH_ARTIFACTS:
            path = run_dir / name
            if path.is_dir():
                files.add_dir(str(path), name=name)
            elif path.is_file():
                files.add_file(str(path), name=name)
        search.log_artifact(files)
        if best_dir is not None and (best_dir / "modules.json").exists():
            model = wandb.Artifact(artifact_name(f"{state['group']}-encoder"), type="model")
            model.add_dir(str(best_dir))
            search.log_artifact(model, aliases=["best", "latest"])
        self._close(search, failed=False)
        self.state.save(state | {"finished": True})
        # W&B's service otherwise writes the last of its run files as this process exits, after the
        # driver's records were last uploaded to --storage (platform.rundir.records)
        wandb.teardown()

    def _trial_run(self, state: dict, trial: str, hyperparameters: dict):
        if trial not in state["trial_runs"]:
            state["trial_runs"][trial] = uuid.uuid4().hex[:12]  # a W&B run id: lowercase letters and digits
            self.state.save(state)
        return self._run(state["trial_runs"][trial], trial, "trial", state["group"], hyperparameters)

    def _run(self, run_id: str, name: str, job_type: str, group: str, config: dict):
        """The open run ``run_id``, opened (created, or resumed after a kill) if it is not."""
        if run_id in _OPEN:
            return _OPEN[run_id]
        import wandb

        self.dir.mkdir(parents=True, exist_ok=True)
        run = wandb.init(
            project=self.config.project,
            entity=self.config.entity,
            group=group,
            job_type=job_type,
            name=name,
            id=run_id,
            resume="allow",
            mode=self.config.mode,
            dir=str(self.dir),
            config=config,
            reinit="create_new",
            settings=wandb.Settings(
                console="off",  # the search's own output stays the terminal's
                silent=True,
                x_disable_stats=True,
                disable_git=True,
                save_code=False,
                init_timeout=INIT_TIMEOUT_S,
                x_transaction_log_flush_interval=FLUSH_SECONDS,  # why: this module's docstring
            ),
        )
        _OPEN[run_id] = run
        return run

    @staticmethod
    def _close(run, failed: bool) -> None:
        run.finish(exit_code=1 if failed else 0)
        _OPEN.pop(run.id, None)
