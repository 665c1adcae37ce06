"""How much of the encoder's gradient the auxiliary MLM term makes, through a random head and through
the head doctune trains for the base (``trainers.mlm_head``).

    .venv/bin/python bench/mlm_gradient_share.py [--batches 12] [--threads 2] [--out bench/results]

The default search's local settings: all-MiniLM-L6-v2 (plain BERT: the local ``docsplit_long``
converts it to a Longformer, whose encoder weights are these), DocSplit pairs of the packaged
corpus (p 0.5, the trials' stream, seed 0), batch 8 pairs at 128 tokens, mean pooling, symmetric
InfoNCE at tau 0.05, the MLM term on view A masked by BERT's rule, the module in training mode
(dropout on), as ``trainers.loop`` builds it. Two heads on the same encoder:

- random: the head transformers creates for a checkpoint without one (what trials trained before);
- trained: the head ``prepare_inputs`` trains for the local profile (``mlm_head`` of
  ``search_spaces/profiles/local.yaml``, 128 tokens, seed 0; taken from the cache when there).

Per batch, one forward of both terms and two backward passes give the encoder's gradient of the
contrastive term, g_c, and of the unweighted MLM term, g_m (every parameter of the encoder, word
embeddings included, which the tied decoder also moves). For each weight w the MLM term's gradient
is w * g_m, and its share of the encoder's gradient norm is |w g_m| / |g_c + w g_m|; beside it
|w g_m| / |g_c| and the cosine between g_c and g_m. Each batch is run with the same dropout seed for
both heads, so g_c is the same for both. Quoted are medians over the batches. Writes
``<out>/mlm_gradient_share.json`` (numbers per batch, machine, versions, date, command) and prints
Markdown for bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

WEIGHTS = (0.05, 0.1, 0.2)  # docsplit_long's mlm_weight choices above 0
PAIRS, LENGTH = 8, 128  # the local profile's train.batch_size and train.max_length


def batches(count: int, tokenizer) -> list[dict]:
    """``count`` tokenised batches of DocSplit pairs, as rank 0 of a one-worker trial builds them."""
    from doctune_core.data import DocumentStream, PreparedCorpus, prepare_corpus
    from doctune_core.encoder import tokenize
    from trainers.batches import PairStream
    from trainers.pairs import STATISTICS_DOCUMENTS, build_pairs
    from trainers.settings import TrialSettings

    documents = DocumentStream(PreparedCorpus.load(prepare_corpus("news-articles").directory), 0, 1, 0)
    pair_builder = build_pairs(
        TrialSettings(recipe="docsplit", batch_size=PAIRS),
        max_length=LENGTH,
        count_tokens=lambda text: len(tokenizer(text, add_special_tokens=False)["input_ids"]),
        documents=documents.first(STATISTICS_DOCUMENTS),
    )
    stream = PairStream(documents.read(), pair_builder, PAIRS, 0, 0, give_up_after=documents.rows)
    made = []
    for step in range(count):
        views_a, views_b = stream.batch(step)
        made.append(tokenize(tokenizer, views_a + views_b, LENGTH))
    return made


def trained_head() -> tuple[str, dict]:
    """The head the local profile's search trains for all-MiniLM-L6-v2 on the packaged corpus."""
    from doctune_core.data import prepare_corpus
    from doctune_core.encoder import embedding_length, resolve_model
    from platform.spec import BUILTIN_PROFILES
    from trainers.config import MlmHeadSettings
    from trainers.mlm_head import RECORD, ensure_mlm_head

    base = resolve_model("all-minilm-l6-v2")
    head = ensure_mlm_head(
        base,
        prepare_corpus("news-articles").directory,
        MlmHeadSettings(**BUILTIN_PROFILES["local"]["mlm_head"]),
        max_length=embedding_length(base, LENGTH),
        seed=0,
        base_name="all-minilm-l6-v2",
        corpus_name="news-articles",
    )
    return str(head.path), json.loads((head.path / RECORD).read_text())


def measure(model_dir: str, new_head: bool, inputs: list[dict], seed: int) -> list[dict]:
    """Per batch: both losses, the norms of the encoder's gradient of each term, their cosine, and
    per weight the MLM term's share of the gradient norm."""
    import torch

    from doctune_core.encoder import load_encoder
    from trainers.losses import mask_tokens
    from trainers.model import ContrastiveModel
    from trainers.settings import TrialSettings
    from trainers.training_loss import LossHeads, training_loss

    hp = TrialSettings(recipe="docsplit", mlm_weight=1.0, temperature=0.05, symmetric=True, pooling="mean")
    torch.manual_seed(seed)  # the random head's initial weights
    model, tokenizer = load_encoder(model_dir, with_mlm_head=True, new_head=new_head)
    module = ContrastiveModel(model, hp.pooling, True, LossHeads(hp, model.config.hidden_size))
    module.train()
    parameters = [p for p in module.encoder.parameters() if p.requires_grad]
    rows = []
    for index, batch in enumerate(inputs):
        masked, labels = mask_tokens(
            batch["input_ids"][:PAIRS],
            batch["special_tokens_mask"][:PAIRS] | (1 - batch["attention_mask"][:PAIRS]),
            tokenizer.mask_token_id,
            len(tokenizer),
            torch.Generator().manual_seed(seed * 1000 + index),
        )
        torch.manual_seed(seed * 1000 + index)  # the same dropout masks for both heads
        outputs = module(batch["input_ids"], batch["attention_mask"], masked, labels, batch["attention_mask"][:PAIRS])
        contrastive, _ = training_loss(hp, {k: v for k, v in outputs.items() if k != "mlm_loss"})
        g_c = _flat(torch.autograd.grad(contrastive, parameters, retain_graph=True, allow_unused=True), parameters)
        g_m = _flat(torch.autograd.grad(outputs["mlm_loss"], parameters, allow_unused=True), parameters)
        c, m = float(g_c.norm()), float(g_m.norm())
        rows.append(
            {
                "contrastive_loss": contrastive.item(),
                "mlm_loss": outputs["mlm_loss"].item(),
                "contrastive_grad_norm": c,
                "mlm_grad_norm": m,
                "cosine": float(torch.nn.functional.cosine_similarity(g_c, g_m, dim=0)),
                "weights": {
                    str(w): {"share": w * m / float((g_c + w * g_m).norm()), "vs_contrastive": w * m / c}
                    for w in WEIGHTS
                },
            }
        )
    return rows


def _flat(grads, parameters):
    """One vector of a gradient per parameter (zeros where a term does not reach a parameter)."""
    import torch

    return torch.cat([(g if g is not None else torch.zeros_like(p)).flatten() for g, p in zip(grads, parameters)])


def _median(rows: list[dict], *path: str) -> float:
    values = []
    for row in rows:
        for key in path:
            row = row[key]
        values.append(row)
    return statistics.median(values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=12)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    import transformers
    from child import gpus  # bench/child.py, beside this script

    from doctune_core.encoder import resolve_model
    from platform import machine  # the project's package keeps the standard library's functions

    torch.set_num_threads(args.threads)
    began = time.perf_counter()
    head_dir, head_record = trained_head()
    from transformers import AutoTokenizer

    inputs = batches(args.batches, AutoTokenizer.from_pretrained(resolve_model("all-minilm-l6-v2")))
    results = {
        "random": measure(resolve_model("all-minilm-l6-v2"), True, inputs, 0),
        "trained": measure(head_dir, False, inputs, 0),
    }
    record = {
        "command": " ".join(["python bench/mlm_gradient_share.py", *sys.argv[1:]]),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": f"{os.cpu_count()} CPUs, {machine()}, {gpus()}",
        "load_average_1min_at_end": os.getloadavg()[0],
        "versions": {
            "python": sys.version.split()[0],
            "torch": torch.__version__,
            "transformers": transformers.__version__,
        },
        "settings": {"pairs": PAIRS, "max_length": LENGTH, "weights": WEIGHTS, "threads": args.threads},
        "trained_head": {
            k: head_record[k] for k in ("held_out_loss", "unigram_loss", "settings", "max_length", "seed")
        },
        "seconds": round(time.perf_counter() - began, 1),
        "batches": results,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "mlm_gradient_share.json").write_text(json.dumps(record, indent=2))
    print(
        f"{record['date']}, {record['machine']}, torch {torch.__version__}, {args.batches} batches, "
        f"{record['seconds']} s\n"
    )
    print("\n".join(share_table(record)))


def share_table(record: dict) -> list[str]:
    """Each head's medians over the batches: the MLM and contrastive losses, the two gradients'
    norms and cosine, and the MLM term's share of the gradient at each weight."""
    from bench.markdown import table

    weights = record["settings"]["weights"]
    rows = [
        [
            name,
            f"{_median(batches, 'mlm_loss'):.2f}",
            f"{_median(batches, 'contrastive_loss'):.3f}",
            f"{_median(batches, 'mlm_grad_norm'):.2f}",
            f"{_median(batches, 'contrastive_grad_norm'):.2f}",
            f"{_median(batches, 'cosine'):+.3f}",
            *(f"{_median(batches, 'weights', str(w), 'share'):.2f}" for w in weights),
        ]
        for name, batches in record["batches"].items()
    ]
    header = ["head", "MLM loss", "contrastive", "\\|g_m\\|", "\\|g_c\\|", "cos(g_c, g_m)"]
    return table([*header, *(f"w {w}" for w in weights)], rows, numeric=range(1, 6 + len(weights)))


if __name__ == "__main__":
    main()
