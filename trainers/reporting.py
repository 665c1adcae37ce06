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

A round's ``scores.json`` is written just before its report, so a checkpoint without one was never
reported; only the latest checkpoint can be one (the next is saved only after the report). A
trial that resumes reports its latest round again, scored now or read from its file: a round
interrupted between its scores and its report reaches the search, and one reported twice is
harmless (ASHA counts ``eval_round``).
"""

from __future__ import annotations

import json
import math
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist

from trainers.checkpoint import SCORES_FILE, drop_superseded_training_state
from trainers.config import Hyperparameters, TrainPlan


@dataclass
class _Round:
    checkpoint: Path
    train_metrics: dict
    scores: Future | None  # rank 0's; None on the other ranks


class RoundReporter:
    def __init__(self, plan: TrainPlan, hp: Hyperparameters, trial_id: str, rank: int, device: torch.device) -> None:
        self.plan, self.hp, self.trial_id, self.device = plan, hp, trial_id, device
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="scores") if rank == 0 else None
        self._in_flight: _Round | None = None

    def submit(self, checkpoint: Path, train_metrics: dict, step: int) -> None:
        """The round whose checkpoint was just saved: score it; it is reported now, or with
        overlap at the first step after its scores arrive. ``step``: where the trial is. The round
        before must have been reported (``wait``) before this checkpoint was saved: a resume starts
        from the latest checkpoint, so only that one may lack its scores."""
        assert self._in_flight is None, "wait for the round in flight before saving the next checkpoint"
        submitted = time.perf_counter()
        scores = self._pool.submit(self._scores, checkpoint) if self._pool is not None else None
        self._in_flight = _Round(checkpoint, train_metrics, scores)
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
        if self._pool is not None:
            began = time.perf_counter() if stood_still_since is None else stood_still_since
            scores, metrics["scoring_seconds"] = pending.scores.result()
            metrics["eval_seconds"] = time.perf_counter() - began  # training stood still for the scores
            metrics |= self._scored_metrics(scores, pending.checkpoint, metrics)
            # written just before the report: a checkpoint with scores has (all but) reached the search
            scores_file = pending.checkpoint / SCORES_FILE
            if not scores_file.exists():
                scores_file.write_text(json.dumps(scores, indent=2))
        if dist.is_initialized():
            shared = [metrics]
            dist.broadcast_object_list(shared, src=0)
            metrics = shared[0]
        ray.train.report(metrics)
        if self._pool is not None:
            drop_superseded_training_state(pending.checkpoint)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)

    def _scores(self, checkpoint: Path) -> tuple[dict, float]:
        """The checkpoint's scores (from the pool, or from the file kept beside it once it was
        reported) and the seconds they took."""
        began = time.perf_counter()
        scores_file = checkpoint / SCORES_FILE
        if scores_file.exists():
            scores = json.loads(scores_file.read_text())
        else:
            scores = self.plan.scorer(str(checkpoint), self.hp.pooling)
        return scores, time.perf_counter() - began

    def _scored_metrics(self, scores: dict, checkpoint: Path, metrics: dict) -> dict:
        scored = self.plan.scorer.metrics(scores)
        objectives = {k: v for k, v in scored.items() if k.partition("/")[0] == "objective"}
        if not all(math.isfinite(v) for v in objectives.values()):
            raise FloatingPointError(f"trial {self.trial_id}: objectives {objectives} at step {metrics['step']}")
        print(
            f"[{self.trial_id}] step {metrics['step']}/{self.plan.steps} loss {metrics['loss']:.4f} "
            f"objective {scored['objective']:.4f} (validation) ({metrics['tokens_per_s']:.0f} tokens/s)"
            + (f", reported at step {metrics['report_step']}" if metrics["report_step"] != metrics["step"] else "")
        )
        return {**scored, "checkpoint": str(checkpoint.resolve())}
