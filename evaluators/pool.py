"""The evaluator actor pool.

The driver starts ``EvalPlan.actor_names`` as named Ray actors (``EvaluatorPool``); each loads its
task data once. The driver hands every trial a ``CheckpointScorer``; the trial's rank 0 calls it
on each saved checkpoint and reports what it returns, so the scores reach Optuna and ASHA.
Actors are restarted if they die and the call is retried on another actor.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from pathlib import Path

from evaluators.plan import EvalPlan
from evaluators.scores import Scores, flatten, main_scores
from evaluators.tasks.base import SPLITS

MAX_ATTEMPTS = 3


class CheckpointMissing(FileNotFoundError):
    """The checkpoint to score was deleted before its turn came."""


class Evaluator:
    """Holds every task of a search; scores a model directory on any of them."""

    def __init__(self, plan: EvalPlan, run_dir: str, device: str = "cpu") -> None:
        import torch

        from evaluators.cache import EmbeddingCache
        from evaluators.tasks import make_task

        torch.set_num_threads(plan.threads)
        self.device = device
        self.plan = plan
        self.run_dir = Path(run_dir).resolve()
        self.cache = EmbeddingCache(self.run_dir / "embeddings")
        # A model outside the run (the base, scored as the baseline row by every search from it)
        # embeds the same texts each time: its embeddings are shared across runs. The key is the
        # model's content, so a changed model never meets another's vectors
        shared = plan.shared_embeddings
        self.shared_cache = EmbeddingCache(shared) if shared else self.cache
        self.tasks = {name: make_task(name, plan.budget) for name in (*plan.tasks, *plan.report_tasks)}
        for task in self.tasks.values():
            task.load()
        self._over_length: dict[str, float] = {}  # task -> share of its texts over max_length

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

    def score(self, model_dir: str, pooling: str, task_names: list[str] | None = None) -> dict[str, dict]:
        """Each task's scores for the encoder in ``model_dir``, on its validation and its test part
        (``evaluators.scores``). A task's scores also say how its parts are made (``split``) and
        which share of its texts exceeded ``max_length`` (``truncated`` or ``chunked``, per the
        task's ``long_inputs``)."""
        scores = {}
        for name, embed in self._embedders(model_dir, pooling, task_names):
            task = self.tasks[name]
            scores[name] = {**task.evaluate(embed), "split": task.metadata.split}
            self._finish(name, model_dir, embed, scores[name])
        return scores

    def outcomes(self, model_dir: str, pooling: str, task_names: list[str], split: str = "test") -> dict:
        """Each task's item-level ``Outcomes`` on one part, for comparing encoders item by item
        (``evaluators.noise``)."""
        outcomes = {}
        for name, embed in self._embedders(model_dir, pooling, task_names):
            outcomes[name] = self.tasks[name].outcomes(embed, split)
            self._finish(name, model_dir, embed, {})
        return outcomes

    def _embedders(self, model_dir: str, pooling: str, task_names: list[str] | None):
        """``(task name, embedder)`` for each task: embeddings come from the cache, the encoder is
        loaded on the first miss only."""
        from core.encoder import embed_texts, embedding_length, load_encoder
        from evaluators.cache import embedding_digest

        if not Path(model_dir).is_dir():
            raise CheckpointMissing(f"checkpoint {model_dir} no longer exists; it cannot be scored")
        digest = embedding_digest(model_dir)
        max_length = embedding_length(model_dir, self.plan.max_length)
        cache = self.cache if self.run_dir in Path(model_dir).resolve().parents else self.shared_cache
        loaded: list = []  # (model, tokenizer), loaded on the first cache miss only

        def embed_missing(texts: list[str], long_inputs: str):
            if not loaded:
                model, tokenizer = load_encoder(model_dir)
                loaded.extend((model.to(self.device), tokenizer))
            settings = {"max_length": max_length, "batch_size": self.plan.batch_size, "device": self.device}
            return embed_texts(*loaded, texts, pooling=pooling, long_inputs=long_inputs, **settings)

        for name in task_names or list(self.plan.tasks):
            policy = self.tasks[name].metadata.long_inputs
            key = f"{digest}-{pooling}-{max_length}" + ("-chunk" if policy == "chunk" else "")
            seen: dict[str, None] | None = {} if name not in self._over_length else None

            def embed(texts: list[str], key=key, policy=policy, seen=seen):
                if seen is not None:  # only until the task's over-length share is known
                    seen.update(dict.fromkeys(texts))
                return cache.embed(key, texts, lambda missing: embed_missing(missing, policy))

            embed.key, embed.seen, embed.max_length, embed.cache = key, seen, max_length, cache
            yield name, embed

    def _finish(self, name: str, model_dir: str, embed, scores: dict) -> None:
        """Save the task's new embeddings; record its share of over-length texts (the same texts
        for every checkpoint, so measured once)."""
        embed.cache.save(embed.key)
        if name not in self._over_length:
            from transformers import AutoTokenizer

            from core.encoder import over_length_share

            tokenizer = AutoTokenizer.from_pretrained(model_dir)
            self._over_length[name] = over_length_share(tokenizer, list(embed.seen), embed.max_length)
        scores["chunked" if self.tasks[name].metadata.long_inputs == "chunk" else "truncated"] = self._over_length[name]


class EvaluatorPool:
    """A search's named evaluator actors, alive for a ``with`` block: ``start`` (or entering)
    creates them, or reattaches to those of a resumed search, and waits until each has loaded its
    task data; leaving the block ends them. Trials reach them by name (``score_checkpoint``)."""

    def __init__(self, plan: EvalPlan, run_dir: str, cpus_per_actor: float, gpus_per_actor: float = 0.0) -> None:
        self.plan, self.run_dir = plan, run_dir
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
            ).remote(self.plan, self.run_dir, device)
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


def score_checkpoint(plan: EvalPlan, model_dir: str, pooling: str, task_names: list[str] | None = None) -> dict:
    """Score ``model_dir`` on one of the pool's actors (chosen by the path), retrying on another
    actor if that one dies mid-call."""
    return _call_pool(plan, model_dir, "score", pooling, task_names)


@dataclass(frozen=True)
class CheckpointScorer:
    """How a trial scores its checkpoints (``trainers.config.Scorer``): built by the driver, so
    trainers never import the evaluators."""

    plan: EvalPlan

    def __call__(self, checkpoint: str, pooling: str) -> Scores:
        return score_checkpoint(self.plan, checkpoint, pooling)

    def metrics(self, scores: Scores) -> dict[str, float]:
        """What a round reports of its scores: every score flattened, the objectives, which read
        validation scores only (what Optuna, ASHA and the best round see), and the test objective,
        logged beside them for the leaderboard and never steering anything."""
        return {
            **flatten(scores),
            **self.plan.reported_objectives(main_scores(scores, "val")),
            "test_objective": self.plan.objective_of(main_scores(scores, "test")),
        }


def checkpoint_outcomes(plan: EvalPlan, model_dir: str, pooling: str, task_names: list[str], split: str = "test"):
    """Each task's item-level ``Outcomes`` for ``model_dir`` on one part, from the pool."""
    return _call_pool(plan, model_dir, "outcomes", pooling, task_names, split)


def _call_pool(plan: EvalPlan, model_dir: str, method: str, *args):
    import ray
    from ray.exceptions import RayActorError

    first = zlib.crc32(model_dir.encode()) % len(plan.actor_names)
    error: Exception | None = None
    for attempt in range(MAX_ATTEMPTS):
        name = plan.actor_names[(first + attempt) % len(plan.actor_names)]
        try:
            actor = ray.get_actor(name, namespace=plan.namespace)
            return ray.get(getattr(actor, method).remote(model_dir, *args))
        except (RayActorError, ValueError) as err:  # ValueError: actor not (yet) registered by name
            error = err
    raise RuntimeError(f"evaluation of {model_dir} failed {MAX_ATTEMPTS} times: {error}")
