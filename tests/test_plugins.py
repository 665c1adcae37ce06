"""The worked example of docs/plugins.md runs as written:
its three files, dropped into a copy of the project, are found by name, refused where they should
be, and do their job on real text and real tensors; the spec accepts them."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap

from tests.conftest import ROOT, documented_plugins

PACKAGES = ("doctune_core", "trainers", "evaluators", "platform", "search_spaces")

CHECK = textwrap.dedent(
    """
    import random
    import zlib

    import numpy as np
    import torch

    from doctune_core.data.corpus import CorpusStats
    from evaluators.plan import EvalBudget
    from evaluators.tasks import TASKS, make_task
    from platform.spec import SpecError, parse_spec, read_raw, find_spec_file
    from trainers.config import NoSettings
    from trainers.losses import CONTRASTIVE_LOSSES
    from trainers.pairs import RECIPES, build_pairs
    from trainers.settings import SETTINGS, TrialSettings

    assert "shuffled" in RECIPES and "alignment" in CONTRASTIVE_LOSSES and "title-match" in TASKS

    # the recipe's two settings join the flat namespace; the recipe receives them and nothing else
    assert SETTINGS["shuffled_share"].owners == SETTINGS["shuffled_min_sentences"].owners == ("recipe shuffled",)
    received = []
    pairs = RECIPES["shuffled"].pairs
    RECIPES["shuffled"].pairs = lambda self, context: received.append(context.settings) or pairs(self, context)
    sentences = [f"Sentence number {i}." for i in range(10)]
    hp = TrialSettings(recipe="shuffled", shuffled_share=1.0, shuffled_min_sentences=3)
    build = build_pairs(hp, 64, lambda t: len(t.split()), [sentences])
    assert [vars(s) for s in received] == [{"shuffled_share": 1.0, "shuffled_min_sentences": 3}]
    view_a, view_b = build(sentences, random.Random(3))
    assert view_a == " ".join(sentences) and sorted(view_b.split()) == sorted(view_a.split()) and view_b != view_a
    assert build(sentences[:2], random.Random(0)) is None  # fewer than shuffled_min_sentences

    def moved(share: float) -> int:  # sentences view B puts elsewhere, over 20 documents
        build = build_pairs(TrialSettings(recipe="shuffled", shuffled_share=share), 64, len, [sentences])
        views = [build(sentences, random.Random(seed))[1] for seed in range(20)]
        return sum(a != b for view in views for a, b in zip(sentences, view.split(" S")))

    assert moved(0.2) < moved(1.0)
    single = CorpusStats(documents=4, sentences=4, single_sentence_documents=4, dropped_empty=0, truncated=0,
                         replaced_invalid_utf8=0)
    assert "one sentence" in RECIPES["shuffled"]().corpus_problem(single)

    a = torch.randn(6, 8, requires_grad=True)
    loss, scale = CONTRASTIVE_LOSSES["alignment"]()(NoSettings(), a, a.detach().clone(), None)
    assert scale == 1 and abs(loss.item()) < 1e-6
    loss, _ = CONTRASTIVE_LOSSES["alignment"]()(NoSettings(), a, torch.randn(6, 8), None)
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
    raw.setdefault("hyperparameters", {}).update(loss="alignment", shuffled_min_sentences=3)
    raw["search"].update(space={"shuffled_share": {"uniform": [0.2, 0.9]}}, warm_start=[])
    raw["search"]["objective"] = {"tasks": {"title-match": 1.0}}
    spec = parse_spec(raw, "smoke")
    fixed = spec.fixed_hyperparameters()
    assert spec.recipe == "shuffled" and fixed.loss == "alignment" and fixed.shuffled_min_sentences == 3
    for where, bad in [("hyperparameters.shuffled_min_sentences", 1), ("search.space.shuffled_share", [0.5, 1.5])]:
        section, key = where.rsplit(".", 1)
        wrong = {**raw, "hyperparameters": dict(raw["hyperparameters"]), "search": dict(raw["search"])}
        if section == "hyperparameters":
            wrong["hyperparameters"][key] = bad
        else:
            wrong["search"]["space"] = {key: {"uniform": bad}}
        try:
            parse_spec(wrong, "smoke")
        except SpecError as err:
            assert str(err).startswith(where) and "out of range" in str(err), err
        else:
            raise AssertionError(f"{where}: {bad} was accepted")
    raw["recipe"] = "shufled"
    try:
        parse_spec(raw, "smoke")
    except SpecError as err:
        assert "unknown recipe 'shufled'" in str(err) and "shuffled" in str(err), err
    else:
        raise AssertionError("a misspelt recipe was accepted")

    from platform.spec.docs import render

    rows = {line.split("|")[1].strip(): line for line in render().splitlines() if line.startswith("| `")}
    assert "recipe shuffled" in rows["`shuffled_share`"] and "≥ 2, ≤ 1000" in rows["`shuffled_min_sentences`"], rows
    print("plug-ins work")
    """
)


def test_the_documented_recipe_loss_and_task_are_one_file_each(tmp_path):
    files = documented_plugins()
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
