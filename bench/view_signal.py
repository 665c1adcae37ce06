"""The training signal each view kind carries at step 0, on doctune's own trainable encoder.

    .venv/bin/python bench/view_signal.py [--views dropout split crops span] [--hard-negatives-for crops span]
        [--batches 4] [--pairs 8] [--max-length 512] [--min-tokens 1024] [--out bench/results/view_signal.json]

The default search's local profile as a trial starts it: the converted all-MiniLM-L6-v2 Longformer
(its [CLS] token's global attention, window 256) built by ``trainers.model.build_module`` in train
mode (dropout on, as every trial trains, whatever its views), mean pooling, symmetric InfoNCE at
tau 0.05, the views tokenized at ``--max-length`` as a trial reads them. For each view kind
(``views``: each recipe's own pair builder, ``trainers.pairs``) and each of ``--batches`` batches of
``--pairs`` pretraining articles over ``--min-tokens`` tokens (the same articles for every kind, in
the same order): the contrastive loss, the positives' and the in-batch negatives' mean cosine
(``trainers.training_loss.view_cosines``) and the gradient's norm over every trainable parameter
(what ``clip_grad_norm_`` sees before a trial's first step; the weights are never stepped). Each
view kind of ``--hard-negatives-for`` is measured again with one hard negative a pair
(``hard_negatives: 1``: a view of the article's first mined BM25 neighbour, ``trainers.hard_negatives``),
with the hard negatives' mean cosine to their anchors. Writes ``--out`` (medians and every batch's
figures) and prints it as a Markdown table (``signal_table``). Validation and test articles never
enter: the pretraining corpus holds none.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if __name__ == "__main__":  # the project's ``platform`` package must come before the stdlib's
    sys.path.insert(0, str(ROOT))
if not hasattr(sys.modules.get("platform"), "__path__"):
    sys.modules.pop("platform", None)

from bench.markdown import table  # noqa: E402

VIEWS = ("dropout", "split", "crops", "span")
FIGURES = ("contrastive_loss", "positive_cosine", "negative_cosine", "grad_norm")
WITH_HARD_NEGATIVE = " + 1 hard negative"  # a kind measured with ``hard_negatives: 1``


def long_articles(corpus, tokenizer, min_tokens: int, count: int, seed: int) -> list[tuple[int, list[str]]]:
    """``count`` pretraining documents (corpus row, sentences) over ``min_tokens`` tokens, in a seeded order."""
    found = []
    documents = (d for group in corpus.row_groups for d in corpus.read_group(group))
    for row, sentences in enumerate(documents):
        if sentences and len(tokenizer(" ".join(sentences), add_special_tokens=False)["input_ids"]) > min_tokens:
            found.append((row, sentences))
    random.Random(seed).shuffle(found)
    if len(found) < count:
        raise SystemExit(f"only {len(found)} pretraining documents are over {min_tokens} tokens; {count} needed")
    return found[:count]


def signal(
    module,
    tokenizer,
    hp,
    documents: list[tuple[int, list[str]]],
    batches: int,
    pairs: int,
    max_length: int,
    seed: int,
    corpus,
) -> list[dict]:
    """Each batch's figures for one view kind: the loss, the views' cosines, the gradient's norm
    (and with ``hp.hard_negatives``, the hard negatives' cosine)."""
    import torch

    from doctune_core.data.neighbours import Neighbours, ensure_neighbours
    from doctune_core.encoder import tokenize
    from trainers.batches import PairBatch
    from trainers.hard_negatives import HardNegatives
    from trainers.pairs import build_pairs
    from trainers.training_loss import training_loss, view_cosines

    count = lambda text: len(tokenizer(text, add_special_tokens=False)["input_ids"])  # noqa: E731
    build = build_pairs(hp, max_length, count, [sentences for _, sentences in documents])
    negatives = None
    if hp.hard_negatives:
        negatives = HardNegatives(corpus, Neighbours.load(ensure_neighbours(corpus)), hp.hard_negatives, build)
    rng, found, pending = random.Random(seed), [], list(documents)
    while len(found) < batches and len(pending) >= pairs:
        pairs_made = PairBatch([], [], [])
        while len(pairs_made.views_a) < pairs and pending:
            row, sentences = pending.pop(0)
            pair = build(sentences, rng)
            hard = negatives.views(row, rng) if negatives is not None and pair is not None else []
            if pair is not None and hard is not None:
                pairs_made.views_a.append(pair[0])
                pairs_made.views_b.append(pair[1])
                pairs_made.negatives.extend(hard)
        if len(pairs_made.views_a) < pairs:
            break
        batch = tokenize(tokenizer, pairs_made.texts, max_length)
        module.zero_grad(set_to_none=True)
        outputs = module(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
        loss, terms = training_loss(hp, outputs)
        loss.backward()
        norm = torch.sqrt(sum((p.grad.float() ** 2).sum() for p in module.parameters() if p.grad is not None))
        n = len(pairs_made.views_a)
        embeddings = outputs["embeddings"].detach()
        cosines = view_cosines(embeddings[:n], embeddings[n : 2 * n])
        found.append({**terms, **cosines, "grad_norm": float(norm), "tokens": int(batch["attention_mask"].sum())})
    return found


def signal_table(record: dict) -> list[str]:
    """Each view kind's medians over its batches: the loss, the positives', the in-batch negatives'
    and the hard negatives' mean cosine, the gradient's norm; and the loss and gradient norm over the
    dropout views'."""
    rows, base = [], record["views"].get("dropout")
    for views, batches in record["views"].items():
        medians = {f: statistics.median(b[f] for b in batches) for f in FIGURES}
        over = {f: medians[f] / statistics.median(b[f] for b in base) for f in ("contrastive_loss", "grad_norm")}
        hard = [b["hard_negative_cosine"] for b in batches if "hard_negative_cosine" in b]
        rows.append(
            [
                views,
                str(len(batches)),
                f"{medians['contrastive_loss']:.4g}",
                f"{medians['positive_cosine']:.3f}",
                f"{medians['negative_cosine']:.3f}",
                f"{statistics.median(hard):.3f}" if hard else "–",
                f"{medians['grad_norm']:.3g}",
                f"{over['contrastive_loss']:,.0f}x" if base else "–",
                f"{over['grad_norm']:,.0f}x" if base else "–",
            ]
        )
    # cos: the mean cosine of the positives, the in-batch negatives and the hard negatives to their anchors
    header = ["views", "batches", "loss", "cos +", "cos -", "cos hard -", "grad norm", "loss / dropout's"]
    return table([*header, "norm / dropout's"], rows, numeric=range(1, 9))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--views", nargs="+", default=list(VIEWS), choices=VIEWS)
    parser.add_argument("--hard-negatives-for", nargs="*", default=["crops", "span"], choices=VIEWS)
    parser.add_argument("--batches", type=int, default=4)
    parser.add_argument("--pairs", type=int, default=8)
    parser.add_argument("--max-length", type=int, default=512)
    parser.add_argument("--min-tokens", type=int, default=1024)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "view_signal.json")
    args = parser.parse_args()
    import torch

    from platform.search_path.inputs import InputsPlan, prepare_inputs
    from platform.spec import load_spec
    from trainers.model import build_module

    torch.manual_seed(args.seed)
    torch.set_num_threads(int(os.environ.get("BENCH_THREADS", "2")))
    spec = load_spec("docsplit_long", "local")[0]
    prepared = prepare_inputs(InputsPlan.of(spec), plan_only=True)
    model_dir, corpus = prepared.model_dir, prepared.corpus
    fixed = spec.fixed_hyperparameters()
    from platform.cluster.environment import cpu_model

    record = {
        "machine": f"{os.cpu_count()} CPUs ({cpu_model()}), torch {torch.__version__}, {time.strftime('%Y-%m-%d')}",
        "seconds": {},
        "settings": vars(args) | {"out": str(args.out), "model": "docsplit_long's local base, converted"},
        "views": {},
    }
    documents = None
    kinds = [(views, 0) for views in args.views] + [(views, 1) for views in args.hard_negatives_for]
    for views, hard_negatives in kinds:
        name = views + (WITH_HARD_NEGATIVE if hard_negatives else "")
        hp = dataclasses.replace(
            fixed, views=views, recipe=None, mlm_weight=0.0, bregman_k=0, hard_negatives=hard_negatives
        )
        module, tokenizer = build_module(model_dir, hp)
        if documents is None:  # the same articles, in the same order, for every kind
            wanted = 2 * args.batches * args.pairs  # some give no pair (a split needs two sentences)
            documents = long_articles(corpus, tokenizer, args.min_tokens, wanted, args.seed)
        began = time.perf_counter()
        settings = (args.batches, args.pairs, args.max_length, args.seed, corpus)
        record["views"][name] = signal(module, tokenizer, hp, documents, *settings)
        record["seconds"][name] = round(time.perf_counter() - began, 1)
        print(f"{name}: {record['seconds'][name]:.0f} s", flush=True)
        args.out.write_text(json.dumps(record, indent=1))
    print("\n".join(signal_table(record)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
