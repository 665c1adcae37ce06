"""The worked example of docs/plugins.md runs as written:
its three files, dropped into a copy of the project, are found by name, refused where they should
be, and do their job on real text and real tensors; the spec accepts them."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import textwrap

from tests.conftest import ROOT

PACKAGES = ("core", "trainers", "evaluators", "platform", "search_spaces")

CHECK = textwrap.dedent(
    """
    import random
    import zlib

    import numpy as np
    import torch

    from core.data.corpus import CorpusStats
    from evaluators.plan import EvalBudget
    from evaluators.tasks import TASKS, make_task
    from platform.spec import SpecError, parse_spec, read_raw, find_spec_file
    from trainers.config import Hyperparameters
    from trainers.losses import CONTRASTIVE_LOSSES
    from trainers.pairs import RECIPES, PairContext, build_pairs

    assert "shuffled" in RECIPES and "alignment" in CONTRASTIVE_LOSSES and "title-match" in TASKS

    sentences = ["One sentence here.", "A second one.", "And a third."]
    context = PairContext(Hyperparameters(recipe="shuffled"), 64, lambda t: len(t.split()), [sentences])
    view_a, view_b = build_pairs(context)(sentences, random.Random(3))
    assert view_a == " ".join(sentences) and sorted(view_b.split()) == sorted(view_a.split())
    assert build_pairs(context)(["Only one."], random.Random(0)) is None
    single = CorpusStats(documents=4, sentences=4, single_sentence_documents=4, dropped_empty=0, truncated=0,
                         replaced_invalid_utf8=0)
    assert "one sentence" in RECIPES["shuffled"]().corpus_problem(single)

    a = torch.randn(6, 8, requires_grad=True)
    loss, scale = CONTRASTIVE_LOSSES["alignment"]()(Hyperparameters(), a, a.detach().clone(), None)
    assert scale == 1 and abs(loss.item()) < 1e-6
    loss, _ = CONTRASTIVE_LOSSES["alignment"]()(Hyperparameters(), a, torch.randn(6, 8), None)
    loss.backward()
    assert a.grad is not None and loss.item() > 0

    task = make_task("title-match", EvalBudget())
    task.load()

    def bag_of_words(texts):  # an embedder that knows words: titles share them with their article
        vectors = np.zeros((len(texts), 4096))
        for row, text in enumerate(texts):
            for word in text.lower().split():
                vectors[row, zlib.crc32(word.encode()) % 4096] += 1
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

    scores = task.evaluate(bag_of_words)
    assert 0.3 < scores["test"]["main"] <= 1.0, scores  # chance: 1 in 20
    assert scores["val"]["n"] == scores["test"]["n"] == 20

    raw = read_raw(find_spec_file("smoke"))
    raw["recipe"] = "shuffled"
    raw.setdefault("hyperparameters", {})["loss"] = "alignment"
    raw["search"]["objective"] = {"tasks": {"title-match": 1.0}}
    spec = parse_spec(raw, "smoke")
    assert spec.recipe == "shuffled" and spec.fixed_hyperparameters().loss == "alignment"
    raw["recipe"] = "shufled"
    try:
        parse_spec(raw, "smoke")
    except SpecError as err:
        assert "unknown recipe 'shufled'" in str(err) and "shuffled" in str(err), err
    else:
        raise AssertionError("a misspelt recipe was accepted")
    print("plug-ins work")
    """
)


def _example_files() -> dict[str, str]:
    """Each file of the worked example: its path (the backticked name before the code) -> code."""
    text = (ROOT / "docs" / "plugins.md").read_text()
    return dict(re.findall(r"^`([\w/]+\.py)`.*?```python\n(.*?)```", text, flags=re.S | re.M))


def test_the_documented_recipe_loss_and_task_are_one_file_each(tmp_path):
    files = _example_files()
    assert sorted(files) == [
        "evaluators/tasks/title_match.py",
        "trainers/losses/alignment.py",
        "trainers/pairs/shuffled.py",
    ]
    for package in PACKAGES:
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    for path, code in files.items():
        (tmp_path / path).write_text(code)
    done = subprocess.run([sys.executable, "-c", CHECK], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "plug-ins work" in done.stdout
