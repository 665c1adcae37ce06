"""The evaluator actor pool.

The driver starts ``EvalPlan.actor_names`` as named Ray actors (``EvaluatorPool``); each loads its
task data once. The driver hands every trial a ``CheckpointScorer``; the trial's rank 0 calls it
on each saved checkpoint and reports what it returns, so the scores reach Optuna and ASHA.
Actors are restarted if they die and the call is retried on another actor (``evaluators.pool_calls``:
what any process of the cluster calls to reach them by name).

A model to score travels to the actor as its files (``doctune_core.model_files``), through Ray's object
store: an actor reads no directory of another node, so it may run where the checkpoint was not
written. Reference encoders, installed with the package on every node, go by path.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from doctune_core.model_files import ModelFiles
from evaluators.plan import EvalPlan
from evaluators.pool_calls import CheckpointMissing, score_checkpoint
from evaluators.references import AS_TASKS_SAY, Reading, Reference
from evaluators.scores import Scores, flatten, main_scores
from evaluators.tasks.base import SPLITS


class Evaluator:
    """Holds every task of a search; scores a model directory (or a reference row) on any of them."""

    def __init__(self, plan: EvalPlan, run_dir: str, device: str = "cpu", run_root: str | None = None) -> None:
        """``run_dir``: where this node keeps the run's embedding cache; ``run_root``: where the run's
        checkpoints are (``RunFiles.root``: a bucket's path where the run is stored there), the run
        directory by default."""
        import torch

        from evaluators.cache import EmbeddingCache
        from evaluators.tasks import make_task

        torch.set_num_threads(plan.threads)
        self.device = device
        self.plan = plan
        self.run_dir = Path(run_dir).resolve()
        self.run_root = f"{run_root or self.run_dir}/"
        self.cache = EmbeddingCache(self.run_dir / "embeddings")
        # A model outside the run (the base, scored as the baseline row by every search from it)
        # embeds the same texts each time: its embeddings are shared across runs. The key is the
        # model's content, so a changed model never meets another's vectors
        shared = plan.shared_embeddings
        self.shared_cache = EmbeddingCache(shared) if shared else self.cache
        self.tasks = {name: make_task(name, plan.budget) for name in (*plan.tasks, *plan.report_tasks)}
        for task in self.tasks.values():
            task.load()
        self._over_length: dict[tuple[str, int], float] = {}  # (task, length) -> share of its texts over it
        self._models = Path(tempfile.mkdtemp(prefix="doctune-scored-"))  # models sent as files, while scored

    def ready(self) -> dict[str, int]:
        return {"tasks": len(self.tasks)}

    def part_items(self) -> dict[str, tuple[str, dict[str, int]]]:
        """Each task's type and items per part, where the task counts them (``Task.item_count``)."""
        counts = {}
        for name, task in self.tasks.items():
            items = {split: task.item_count(split) for split in SPLITS}
            if all(n is not None for n in items.values()):
                counts[name] = (task.metadata.type, items)
        return counts

    def score(
        self,
        model: str | ModelFiles,
        pooling: str,
        task_names: list[str] | None = None,
        reading: Reading = AS_TASKS_SAY,
        parts: tuple[str, ...] | None = None,
    ) -> dict[str, dict]:
        """Each task's scores for the encoder ``model`` (its directory, or its files) on ``parts``
        (default the plan's: validation and test), as ``evaluators.scores`` keeps them. A task's scores
        also say how its parts are made (``split``) and which share of its texts exceeded its length
        (``truncated`` or ``chunked``, per the task's ``long_inputs`` unless ``reading`` says otherwise)."""
        scores = {}
        with self._local(model) as (model_dir, cache):
            for name, embed in self._embedders(model_dir, cache, pooling, task_names, reading):
                task = self.tasks[name]
                scores[name] = {**task.evaluate(embed, parts or self.plan.parts), "split": task.metadata.split}
                self._finish(name, model_dir, embed, scores[name])
        return scores

    def outcomes(
        self,
        model: str | ModelFiles,
        pooling: str,
        task_names: list[str],
        split: str = "test",
        reading: Reading = AS_TASKS_SAY,
    ) -> dict:
        """Each task's item-level ``Outcomes`` on one part, for comparing encoders item by item
        (``doctune_core.noise``)."""
        outcomes = {}
        with self._local(model) as (model_dir, cache):
            for name, embed in self._embedders(model_dir, cache, pooling, task_names, reading):
                outcomes[name] = self.tasks[name].outcomes(embed, split)
                self._finish(name, model_dir, embed, {})
        return outcomes

    def start_cosine(
        self, model: str | ModelFiles, start: str | ModelFiles, pooling: str, task_names: list[str]
    ) -> dict[str, float]:
        """Per task of ``task_names`` with short validation texts (``Task.short_texts``: queries, short
        documents), the mean cosine between ``model``'s and ``start``'s embeddings of them, each read as
        its task reads it: 1.0 where training left them where they were. Reported only; validation's
        texts, never a test part's."""
        import numpy as np

        names = [name for name in task_names if self.tasks[name].short_texts("val")]
        cosines = {}
        with self._local(model) as (model_dir, cache), self._local(start) as (start_dir, start_cache):
            trained = self._embedders(model_dir, cache, pooling, names, AS_TASKS_SAY)
            started = self._embedders(start_dir, start_cache, pooling, names, AS_TASKS_SAY)
            for (name, embed), (_, embed_start) in zip(trained, started):
                texts = self.tasks[name].short_texts("val")
                cosines[name] = float(np.mean(np.einsum("ij,ij->i", embed(texts), embed_start(texts))))
                embed.cache.save(embed.key)  # not _finish: these texts are not the task's whole part
                embed_start.cache.save(embed_start.key)
        return cosines

    @contextmanager
    def _local(self, model: str | ModelFiles) -> Iterator[tuple[str, object]]:
        """``model``'s directory on this node (files sent are written here while the block runs)
        and the embedding cache it belongs to: the run's for the run's checkpoints, the shared one
        for a model outside the run (the base, the same for every search from it)."""
        origin = model.name if isinstance(model, ModelFiles) else str(Path(model).resolve())
        cache = self.cache if origin.startswith(self.run_root) else self.shared_cache
        if not isinstance(model, ModelFiles):
            if not Path(model).is_dir():
                raise CheckpointMissing.of(model)
            yield model, cache
            return
        directory = model.materialize(self._models)
        try:
            yield str(directory), cache
        finally:
            shutil.rmtree(directory, ignore_errors=True)

    def reference_scores(self, reference: Reference, pooling: str, task_names: list[str]) -> dict[str, dict]:
        """A reference row's scores (``evaluators.references``): BM25 on the retrieval tasks among
        ``task_names``, or the reference's encoder read as it says."""
        if reference.model is not None:
            return self.score(reference.model, pooling, task_names, reading=reference.reading)
        scores = {}
        for name in self._bm25_tasks(task_names):
            task = self.tasks[name]
            parts = {
                split: {**self._bm25_outcomes(name, split).summary(), **task.part_sizes(split)}
                for split in self.plan.parts
            }
            scores[name] = {**parts, "split": task.metadata.split}
        return scores

    def reference_outcomes(self, reference: Reference, pooling: str, task_names: list[str], split: str = "test"):
        """A reference row's item-level ``Outcomes`` on one part (BM25: its retrieval tasks only)."""
        if reference.model is not None:
            return self.outcomes(reference.model, pooling, task_names, split, reading=reference.reading)
        return {name: self._bm25_outcomes(name, split) for name in self._bm25_tasks(task_names)}

    def _bm25_tasks(self, task_names: list[str]) -> list[str]:
        return [name for name in task_names if self.tasks[name].metadata.type == "retrieval"]

    def _bm25_outcomes(self, name: str, split: str):
        from evaluators.references import bm25_runs

        task = self.tasks[name]
        return task.ranked_outcomes(bm25_runs(task, split), split, len(task.parts[split][0]))

    def scoring_length(self, model_dir: str, task_name: str, reading: Reading = AS_TASKS_SAY) -> int:
        """The tokens per text ``task_name`` embeds ``model_dir``'s texts at: ``EvalPlan.scoring_length``,
        at most ``reading.max_length`` and the model's positions."""
        from doctune_core.encoder import embedding_length

        length = self.plan.scoring_length(self.tasks[task_name].metadata.long_documents)
        return embedding_length(model_dir, min(length, reading.max_length or length))

    def _embedders(self, model_dir: str, cache, pooling: str, task_names: list[str] | None, reading: Reading):
        """``(task name, embedder)`` for each task: embeddings come from ``cache``, the encoder is
        loaded on the first miss only."""
        import torch

        from doctune_core.encoder import computes_bf16, embed_texts, load_encoder
        from evaluators.cache import embedding_digest

        digest = embedding_digest(model_dir)
        # bf16 embeddings are kept apart from fp32 ones: a run compares rows embedded alike
        bf16 = self.plan.bf16 and computes_bf16(torch.device(self.device))
        loaded: list = []  # (model, tokenizer), loaded on the first cache miss only

        def embed_missing(texts: list[str], long_inputs: str, max_length: int):
            if not loaded:
                model, tokenizer = load_encoder(model_dir)
                loaded.extend((model.to(self.device), tokenizer))
            settings = {"max_length": max_length, "batch_size": self.plan.batch_size, "device": self.device}
            return embed_texts(*loaded, texts, pooling=pooling, long_inputs=long_inputs, bf16=bf16, **settings)

        for name in task_names or list(self.plan.tasks):
            policy = reading.long_inputs or self.tasks[name].metadata.long_inputs
            max_length = self.scoring_length(model_dir, name, reading)
            key = f"{digest}-{pooling}-{max_length}" + ("-chunk" if policy == "chunk" else "")
            key += "-bf16" if bf16 else ""
            seen: dict[str, None] | None = {} if (name, max_length) not in self._over_length else None

            def embed(texts: list[str], key=key, policy=policy, max_length=max_length, seen=seen):
                if seen is not None:  # only until the task's over-length share is known
                    seen.update(dict.fromkeys(texts))
                return cache.embed(key, texts, lambda missing: embed_missing(missing, policy, max_length))

            embed.key, embed.seen, embed.max_length, embed.cache, embed.policy = key, seen, max_length, cache, policy
            yield name, embed

    def _finish(self, name: str, model_dir: str, embed, scores: dict) -> None:
        """Save the task's new embeddings; record its share of over-length texts (the same texts
        for every checkpoint, so measured once per length)."""
        embed.cache.save(embed.key)
        measured = (name, embed.max_length)
        if measured not in self._over_length:
            from transformers import AutoTokenizer

            from doctune_core.encoder import over_length_share

            tokenizer = AutoTokenizer.from_pretrained(model_dir)
            self._over_length[measured] = over_length_share(tokenizer, list(embed.seen), embed.max_length)
        scores["chunked" if embed.policy == "chunk" else "truncated"] = self._over_length[measured]


class EvaluatorPool:
    """A search's named evaluator actors, alive for a ``with`` block: ``start`` (or entering)
    creates them, or reattaches to those of a resumed search, and waits until each has loaded its
    task data; leaving the block ends them. Trials reach them by name (``score_checkpoint``)."""

    def __init__(
        self,
        plan: EvalPlan,
        run_dir: str,
        cpus_per_actor: float,
        gpus_per_actor: float = 0.0,
        run_root: str | None = None,
    ) -> None:
        """``run_dir`` and ``run_root``: as ``Evaluator`` takes them."""
        self.plan, self.run_dir, self.run_root = plan, run_dir, run_root
        self.cpus_per_actor, self.gpus_per_actor = cpus_per_actor, gpus_per_actor
        self.actors: list = []

    def start(self) -> EvaluatorPool:
        import ray

        if self.actors:
            return self
        remote = ray.remote(Evaluator)
        # Said explicitly: Ray 2.60 no longer hides the GPUs from an actor that holds none
        # (CUDA_VISIBLE_DEVICES is left as it is), so "is CUDA available" would be yes on any GPU node
        device = "cuda" if self.gpus_per_actor > 0 else "cpu"
        self.actors = [
            remote.options(
                name=name,
                namespace=self.plan.namespace,
                get_if_exists=True,
                num_cpus=self.cpus_per_actor,
                num_gpus=self.gpus_per_actor,
                max_restarts=3,
                max_task_retries=2,
            ).remote(self.plan, self.run_dir, device, self.run_root)
            for name in self.plan.actor_names
        ]
        ray.get([actor.ready.remote() for actor in self.actors])
        return self

    def part_items(self) -> dict[str, tuple[str, dict[str, int]]]:
        """``Evaluator.part_items`` of the pool's tasks (every actor holds the same parts)."""
        import ray

        return ray.get(self.start().actors[0].part_items.remote())

    def __enter__(self) -> EvaluatorPool:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        import ray

        if ray.is_initialized():
            for actor in self.actors:
                ray.kill(actor, no_restart=True)
        self.actors = []


@dataclass(frozen=True)
class CheckpointScorer:
    """How a trial scores its checkpoints (``trainers.config.Scorer``): built by the driver, so
    trainers never import the evaluators."""

    plan: EvalPlan

    def __call__(self, checkpoint: str, pooling: str, name: str | None = None) -> Scores:
        return score_checkpoint(self.plan, checkpoint, pooling, name=name)

    def metrics(self, scores: Scores) -> dict[str, float]:
        """What a round reports of its scores: every score flattened and the objectives, which read
        validation scores only (what Optuna, ASHA and the best round see). A search's rounds score
        validation alone (``platform.search_path.resolution``); where a plan scores the test part too, its
        objective is logged beside them and never steers anything."""
        reported = {**flatten(scores), **self.plan.reported_objectives(main_scores(scores, "val"))}
        if "test" in self.plan.parts:
            reported["test_objective"] = self.plan.objective_of(main_scores(scores, "test"))
        return reported
