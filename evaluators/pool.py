"""The evaluator actor pool.

The driver starts ``EvalPlan.actor_names`` as named Ray actors (``start_pool``); each loads its
task data once. A trial's rank 0 calls ``score_checkpoint`` after saving a checkpoint and before
it reports, so the scores reach Optuna and ASHA. Actors are restarted if they die and the call
is retried on another actor.
"""

from __future__ import annotations

import zlib
from pathlib import Path

from trainers.config import EvalPlan

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
        self.cache = EmbeddingCache(Path(run_dir) / "embeddings")
        self.tasks = {name: make_task(name, plan.budget) for name in (*plan.tasks, *plan.report_tasks)}
        for task in self.tasks.values():
            task.load()
        self._over_length: dict[str, float] = {}  # task -> share of its texts over max_length

    def ready(self) -> dict[str, int]:
        return {"tasks": len(self.tasks)}

    def score(self, model_dir: str, pooling: str, task_names: list[str] | None = None) -> dict[str, dict[str, float]]:
        """Each task's scores for the encoder in ``model_dir``. A task's scores also say which share
        of its texts exceeded ``max_length`` (``truncated`` or ``chunked``, per the task's
        ``long_inputs``)."""
        from evaluators.cache import weights_digest
        from trainers.encoder import embed_texts, load_encoder, over_length_share

        if not Path(model_dir).is_dir():
            raise CheckpointMissing(f"checkpoint {model_dir} no longer exists; it cannot be scored")
        digest = weights_digest(model_dir)
        loaded: list = []  # (model, tokenizer), loaded on the first cache miss only

        def embed_missing(texts: list[str], long_inputs: str):
            if not loaded:
                model, tokenizer = load_encoder(model_dir)
                loaded.extend((model.to(self.device), tokenizer))
            settings = {"max_length": self.plan.max_length, "batch_size": self.plan.batch_size, "device": self.device}
            return embed_texts(*loaded, texts, pooling=pooling, long_inputs=long_inputs, **settings)

        scores = {}
        for name in task_names or list(self.plan.tasks):
            task = self.tasks[name]
            policy = task.metadata.long_inputs
            key = f"{digest}-{pooling}-{self.plan.max_length}" + ("-chunk" if policy == "chunk" else "")
            seen: dict[str, None] | None = {} if name not in self._over_length else None

            def embed(texts: list[str], key=key, policy=policy, seen=seen):
                if seen is not None:  # only until the task's over-length share is known
                    seen.update(dict.fromkeys(texts))
                return self.cache.embed(key, texts, lambda missing: embed_missing(missing, policy))

            scores[name] = task.evaluate(embed)
            self.cache.save(key)
            if name not in self._over_length:  # a task embeds the same texts for every checkpoint
                from transformers import AutoTokenizer

                tokenizer = AutoTokenizer.from_pretrained(model_dir)
                self._over_length[name] = over_length_share(tokenizer, list(seen), self.plan.max_length)
            scores[name]["chunked" if policy == "chunk" else "truncated"] = self._over_length[name]
        return scores


def start_pool(plan: EvalPlan, run_dir: str, cpus_per_actor: float, gpus_per_actor: float = 0.0) -> list:
    """Create (or reattach to) the named evaluator actors and wait until each has loaded its data."""
    import ray

    remote = ray.remote(Evaluator)
    # Said explicitly: Ray 2.60 no longer hides the GPUs from an actor that holds none
    # (CUDA_VISIBLE_DEVICES is left as it is), so "is CUDA available" would be yes on any GPU node
    device = "cuda" if gpus_per_actor > 0 else "cpu"
    actors = [
        remote.options(
            name=name,
            namespace=plan.namespace,
            get_if_exists=True,
            num_cpus=cpus_per_actor,
            num_gpus=gpus_per_actor,
            max_restarts=3,
            max_task_retries=2,
        ).remote(plan, run_dir, device)
        for name in plan.actor_names
    ]
    ray.get([actor.ready.remote() for actor in actors])
    return actors


def score_checkpoint(
    plan: EvalPlan, model_dir: str, pooling: str, task_names: list[str] | None = None
) -> dict[str, dict[str, float]]:
    """Score ``model_dir`` on one of the pool's actors (chosen by the path), retrying on another
    actor if that one dies mid-call."""
    import ray
    from ray.exceptions import RayActorError

    first = zlib.crc32(model_dir.encode()) % len(plan.actor_names)
    error: Exception | None = None
    for attempt in range(MAX_ATTEMPTS):
        name = plan.actor_names[(first + attempt) % len(plan.actor_names)]
        try:
            actor = ray.get_actor(name, namespace=plan.namespace)
            return ray.get(actor.score.remote(model_dir, pooling, task_names))
        except (RayActorError, ValueError) as err:  # ValueError: actor not (yet) registered by name
            error = err
    raise RuntimeError(f"evaluation of {model_dir} failed {MAX_ATTEMPTS} times: {error}")
