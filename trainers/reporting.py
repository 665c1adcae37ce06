"""Each round's checkpoint scored on the evaluator pool and reported to Tune, in order.

Rank 0 hands the saved checkpoint to the pool; every rank then reports the same metrics (the
round's training metrics, its scores, the validation objective that Optuna and ASHA read, and the
test objective logged beside it), so the scores reach the search.

With ``train.overlap_scoring`` (the default) the trial trains on while the pool scores: rank 0
waits for the pool in a background thread, every step the ranks agree whether the scores have
arrived (one small all-reduce, only while a round is in flight) and report the round together at
the first step after they have. At most one round is in flight: the next checkpoint, a diverged
loss and the end of the trial first wait for it, so the search sees every round, in order, the
last one before the trial ends. A trial the scheduler stops is torn down by Tune wherever it then
is, as without overlap. Each report carries ``report_step`` (the step the trial had reached),
``scoring_seconds`` (the pool's time on the round) and ``eval_seconds`` (the time training stood
still for it).

A round's checkpoint is saved to a staging directory on rank 0's node; its ``scores.json`` and
``report.json`` (the whole report) are written into it, and rank 0's report carries it to Ray
Train, which persists it to the trial's storage and deletes the staged copy
(``trainers.checkpoint``): a checkpoint in storage was reported. A report leaves the trial before
the driver has it: one on its way when the whole search was killed is lost with the driver. So a
trial that resumes reports every round in storage again from its ``report.json``: every round
reaches the search, in order, and one reported twice is harmless (ASHA counts ``eval_round``, the
trackers skip a step they logged, the leaderboard takes the earliest of equal rounds; PBT's case:
docs/decisions/population-based-training.md).
"""

from __future__ import annotations

import json
import logging
import math
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist

from doctune_core.data.atomic import atomic_file
from trainers.checkpoint import CHECKPOINTS, REPORT_FILE, SCORES_FILE, drop_superseded_training_state, trial_path
from trainers.config import Hyperparameters, TrainPlan

log = logging.getLogger(f"doctune.{__name__}")

ROUND_SECONDS = ("train_seconds", "scoring_seconds", "eval_seconds")  # the time a round's report accounts for


@dataclass
class _Round:
    staged: Path  # where rank 0 saved it, on its node
    persisted: str  # where its report persists it, in the trial's storage (``RunFiles.path``)
    train_metrics: dict
    scores: Future | None  # rank 0's; None on the other ranks


class RoundReporter:
    def __init__(self, plan: TrainPlan, hp: Hyperparameters, trial_id: str, rank: int, device: torch.device) -> None:
        self.plan, self.hp, self.trial_id, self.device = plan, hp, trial_id, device
        self.files = plan.run_files
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="scores") if rank == 0 else None
        self._in_flight: _Round | None = None

    def submit(self, staged: Path, train_metrics: dict, step: int) -> None:
        """The round whose checkpoint was just saved to ``staged`` (rank 0's; its report will persist
        it under the same name in the trial's storage): score it; it is reported now, or with
        overlap at the first step after its scores arrive. ``step``: where the trial is. The round
        before must have been reported (``wait``) before this checkpoint was saved."""
        assert self._in_flight is None, "wait for the round in flight before saving the next checkpoint"
        submitted = time.perf_counter()
        persisted = self.files.path(trial_path(self.trial_id, CHECKPOINTS, staged.name))
        scores = self._pool.submit(self._scores, staged, persisted) if self._pool is not None else None
        self._in_flight = _Round(staged, persisted, train_metrics, scores)
        if not self.plan.overlap_scoring:
            self.wait(step, stood_still_since=submitted)

    def poll(self, step: int) -> None:
        """Every step: report the round in flight if its scores have arrived (every rank at once)."""
        if self._in_flight is None:
            return
        arrived = self._pool is None or self._in_flight.scores.done()
        flag = torch.tensor([float(arrived)], device=self.device)
        if dist.is_initialized():
            dist.all_reduce(flag, op=dist.ReduceOp.MIN)  # only rank 0's can be 0
        if flag.item():
            self.wait(step)

    def wait(self, step: int, stood_still_since: float | None = None) -> None:
        """Report the round in flight, if any, waiting for its scores. ``stood_still_since``: when
        training stopped for them (``time.perf_counter``), if before this call."""
        import ray.train

        if self._in_flight is None:
            return
        pending, self._in_flight = self._in_flight, None
        metrics = dict(pending.train_metrics) | {"report_step": step}
        if self._pool is None:
            ray.train.report(self._from_rank_0(metrics))
            return
        began = time.perf_counter() if stood_still_since is None else stood_still_since
        scores, metrics["scoring_seconds"] = pending.scores.result()
        metrics["eval_seconds"] = time.perf_counter() - began  # training stood still for the scores
        metrics |= self._scored_metrics(scores, pending, metrics)
        for name, value in ((SCORES_FILE, scores), (REPORT_FILE, metrics)):
            with atomic_file(pending.staged / name, "w", encoding="utf-8") as handle:
                json.dump(value, handle, indent=2)
        checkpoint = ray.train.Checkpoint.from_directory(pending.staged)
        ray.train.report(
            self._from_rank_0(metrics),
            checkpoint=checkpoint,
            checkpoint_dir_name=pending.staged.name,
            delete_local_checkpoint_after_upload=True,
        )
        if not self.plan.population:  # under PBT another trial may go on from it
            drop_superseded_training_state(self.files, self.trial_id, pending.staged.name)

    def report_again(self, rounds: list[str]) -> None:
        """On a resume: report each of the trial's ``rounds`` (``step_N`` names, in storage) again as
        it was reported (``report.json``), oldest first. Its seconds were counted when it was first
        reported, so they are reported as 0 here: a round lost with the driver is left out of the
        timings rather than one received counted twice."""
        import ray.train

        again = []
        if self._pool is not None:
            for checkpoint in (trial_path(self.trial_id, CHECKPOINTS, name) for name in rounds):
                if not self.files.is_file(f"{checkpoint}/{REPORT_FILE}"):
                    continue
                metrics = self.files.read_json(f"{checkpoint}/{REPORT_FILE}")
                metrics |= {key: 0.0 for key in ROUND_SECONDS if key in metrics}
                # where it is now: the run directory may have moved, or been fetched from its copy
                again.append(metrics | {"checkpoint": self.files.path(checkpoint)})
        for metrics in self._from_rank_0(again):
            ray.train.report(metrics)

    @staticmethod
    def _from_rank_0(value):
        """Rank 0's ``value`` on every rank: every rank reports the same metrics."""
        if not dist.is_initialized():
            return value
        shared = [value]
        dist.broadcast_object_list(shared, src=0)
        return shared[0]

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)

    def _scores(self, staged: Path, persisted: str) -> tuple[dict, float]:
        """The staged checkpoint's scores, under the name it will have in storage (which chooses the
        run's embedding cache), and the seconds they took."""
        began = time.perf_counter()
        scores = self.plan.scorer(str(staged), self.hp.pooling, name=persisted)
        return scores, time.perf_counter() - began

    def _scored_metrics(self, scores: dict, pending: _Round, metrics: dict) -> dict:
        scored = self.plan.scorer.metrics(scores)
        objectives = {k: v for k, v in scored.items() if k.partition("/")[0] == "objective"}
        if not all(math.isfinite(v) for v in objectives.values()):
            raise FloatingPointError(f"trial {self.trial_id}: objectives {objectives} at step {metrics['step']}")
        log.info(
            f"[{self.trial_id}] step {metrics['step']}/{self.plan.steps} loss {metrics['loss']:.4f} "
            f"objective {scored['objective']:.4f} (validation) ({metrics['tokens_per_s']:.0f} tokens/s)"
            + (f", reported at step {metrics['report_step']}" if metrics["report_step"] != metrics["step"] else "")
        )
        return {**scored, "checkpoint": pending.persisted}
