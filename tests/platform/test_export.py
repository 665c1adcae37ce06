"""Exporting a trial: transformers and sentence-transformers load it and embed exactly as doctune
does, the model card says what it is, and bad input is refused with nothing written.

The run directory is built without a search: real checkpoints of the embedded MiniLM (and of a
Longformer made from it) saved by the trainers' own checkpoint code, a leaderboard written by the
report's own writer, and the smoke spec's search.json.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import get_args

import numpy as np
import pytest
import torch

from doctune_core.encoder import embed_texts, load_encoder
from doctune_core.longformer import convert_to_longformer
from doctune_core.run_files import RunFiles
from evaluators.leaderboard import BASELINE_ID, Leaderboard, LeaderboardRow, write_leaderboard
from platform.exit_codes import EXIT_BAD_INPUT, EXIT_OK
from platform.export import export_best
from platform.export.cli import main as export_main
from platform.export.model_card import USAGE_TEXTS
from platform.export.st_files import POOLINGS
from platform.spec import load_spec
from tests.conftest import ROOT
from trainers.checkpoint import CHECKPOINTS, save_checkpoint, trial_path
from trainers.config import Pooling
from trainers.rounds import checkpoint_record
from trainers.settings import TrialSettings

# Ranked as in a real leaderboard; the baseline scores above every trial here on purpose.
TRIALS = {"mean": "7f3a0001", "cls": "7f3a0002", "max": "7f3a0003", "longformer": "7f3a0004"}
ERRORED = "deadbeef"
TASKS = ["news-title-retrieval", "r8-fewshot"]
SMOKE_LENGTH = load_spec("smoke", "smoke")[0].evaluation.max_length  # what the exports were scored at
SENTENCES = [
    "The central bank raised interest rates by a quarter point on Tuesday.",
    "Heavy rain flooded several villages in the north of the country overnight.",
    "Shares in the carmaker fell after it cut its profit forecast for the year.",
    # longer than the smoke profile's evaluation tokens (SMOKE_LENGTH): truncation must match too
    "The government said on Monday that it would present a new budget to parliament next month, after "
    "weeks of talks with unions and employers over pensions, public sector pay and the cost of energy. "
    "The finance minister told reporters that the plan would cut the deficit by half within three years "
    "while protecting spending on schools and hospitals, but opposition leaders said the figures did not "
    "add up and accused the coalition of hiding tax rises that would fall on families. Economists were "
    "divided: some welcomed the promise of restraint, others warned that cutting too fast could push the "
    "economy back into recession at a time when exports are already weak and unemployment is rising in "
    "the industrial regions of the south and east, where several large factories have closed this year.",
]


def _scores(main: float) -> dict[str, dict]:
    """A checkpoint's scores (``evaluators.scores``): test as given, validation a little apart."""
    test = {
        "news-title-retrieval": {"main": main, "ndcg_at_10": main, "recall_at_100": 1.0, "queries": 30.0},
        "r8-fewshot": {"main": main - 0.1, "macro_f1": main - 0.1, "accuracy": 0.9},
    }
    return {task: {"val": {"main": v["main"] + 0.01}, "test": {**v, "main_se": 0.02}} for task, v in test.items()}


def _save_trial(run_dir: Path, trial_id: str, model_dir: str, pooling: str) -> Path:
    """A real checkpoint, written as a trial writes it."""
    model, tokenizer = load_encoder(model_dir)
    hp = TrialSettings(pooling=pooling)
    plan = SimpleNamespace(base_model_name="all-minilm-l6-v2", corpus_name="news-articles", max_length=64)
    return save_checkpoint(
        run_dir / trial_path(trial_id, CHECKPOINTS, "step_000002"),
        encoder=model,
        full_model=model,
        tokenizer=tokenizer,
        optimizer=torch.optim.AdamW(model.parameters()),
        record=checkpoint_record(plan, hp, trial_id, 2),
        state={"step": 2, "eval_round": 1},
    )


@pytest.fixture(scope="module")
def run_dir(minilm_dir, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("export")
    run = root / "smoke"
    spec, spec_path = load_spec("smoke", "smoke")
    summary = {"spec": str(spec_path), "profile": "smoke", "resolved_spec": dataclasses.asdict(spec)}
    run.mkdir()
    (run / "search.json").write_text(json.dumps(summary, indent=2, default=str))
    # a window of 16 tokens: longer texts need [CLS]'s global attention to embed as doctune does
    longformer = str(convert_to_longformer(minilm_dir, str(root / "longformer"), 512, 16))
    rows = [
        LeaderboardRow(BASELINE_ID, "base model, untouched", 0.95, 0, minilm_dir, {"pooling": "mean"}, _scores(1.0))
    ]
    for rank, (pooling, trial) in enumerate(TRIALS.items()):
        model_dir = longformer if pooling == "longformer" else minilm_dir
        checkpoint = _save_trial(run, trial, model_dir, "mean" if pooling == "longformer" else pooling)
        hp = dataclasses.asdict(TrialSettings(pooling="mean" if pooling == "longformer" else pooling))
        rows.append(
            LeaderboardRow(trial, "completed", 0.8 - rank / 100, 2, str(checkpoint), hp, _scores(0.85 - rank / 100))
        )
    rows.append(LeaderboardRow(ERRORED, "error: RuntimeError: out of memory", None, None, None, {"pooling": "mean"}))
    write_leaderboard(rows, run, TASKS)
    return run


@pytest.fixture(scope="module")
def exports(run_dir, tmp_path_factory) -> dict[str, Path]:
    """Every trial exported once through the CLI's entry point."""
    root = tmp_path_factory.mktemp("exported")
    done = {}
    for name, trial in TRIALS.items():
        assert export_main([str(run_dir), "--trial", trial, "--to", str(root / name)]) == 0
        done[name] = root / name
    return done


def _snippets(card: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", card, flags=re.DOTALL)


def _doctune_embeddings(model_dir: Path, pooling: str, texts: list[str]) -> np.ndarray:
    model, tokenizer = load_encoder(str(model_dir))
    return embed_texts(model, tokenizer, texts, pooling=pooling, max_length=SMOKE_LENGTH)


def test_every_pooling_doctune_offers_has_a_sentence_transformers_equivalent():
    assert set(POOLINGS) == set(get_args(Pooling))


@pytest.mark.parametrize("pooling", ["mean", "cls", "max"])
def test_sentence_transformers_embeds_exactly_as_doctune(exports, pooling):
    from sentence_transformers import SentenceTransformer

    directory = exports[pooling]
    config = json.loads((directory / "1_Pooling" / "config.json").read_text())
    assert [k for k, v in config.items() if v is True and k.startswith("pooling_mode")] == [POOLINGS[pooling].st_flag]
    assert json.loads((directory / "sentence_bert_config.json").read_text())["max_seq_length"] == SMOKE_LENGTH
    model = SentenceTransformer(str(directory), device="cpu")
    got = model.encode(SENTENCES, convert_to_numpy=True)
    expected = _doctune_embeddings(directory, pooling, SENTENCES)
    np.testing.assert_allclose(got, expected, atol=1e-5)
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-6)


@pytest.mark.parametrize("name", ["mean", "cls", "max", "longformer"])
def test_the_model_cards_snippets_give_doctunes_embeddings(exports, name):
    directory = exports[name]
    pooling = "mean" if name == "longformer" else name
    snippets = _snippets((directory / "README.md").read_text())
    assert len(snippets) == 2  # sentence-transformers, transformers
    expected = _doctune_embeddings(directory, pooling, SENTENCES)
    for snippet in snippets:
        namespace: dict = {}
        exec(snippet.replace(json.dumps(USAGE_TEXTS), json.dumps(SENTENCES)), namespace)
        embeddings = namespace["embeddings"]
        embeddings = embeddings.numpy() if isinstance(embeddings, torch.Tensor) else embeddings
        np.testing.assert_allclose(embeddings, expected, atol=1e-5)


def test_the_model_card_says_what_the_encoder_is_and_how_to_rerun_its_search(exports):
    directory = exports["cls"]
    card = (directory / "README.md").read_text()
    assert card.startswith(f"# smoke: trial {TRIALS['cls']}")
    for fact in (
        "`docsplit` recipe",
        "`all-minilm-l6-v2`",
        "`news-articles` corpus",
        "profile `smoke`",
        "cls pooling",
        f"truncated to {SMOKE_LENGTH} tokens",
        "(1 × news-title-retrieval + 1 × r8-fewshot) / 2 = 0.7900",
        "| news-title-retrieval | ndcg_at_10 | 0.8400±0.0200 | 0.85 | 1.0 |",  # test ± error, validation
        "| r8-fewshot | macro_f1 | 0.7400±0.0200 | 0.75 | 1.0 |",
        "| split_probability | 0.5 | yes |",
        "| temperature | 0.05 | yes |",
        "| pooling | cls |  |",
        "python -m platform.search smoke --profile smoke\n",
    ):
        assert fact in card
    record = json.loads((directory / "doctune.json").read_text())
    assert record["trial_id"] == TRIALS["cls"] and record["pooling"] == "cls" and record["profile"] == "smoke"
    assert record["scores"]["r8-fewshot"]["test"]["main"] == pytest.approx(0.74)
    assert record["objective"] == pytest.approx(0.79)
    assert not (directory / "training_state").exists()


def test_sentence_transformers_runs_an_exported_longformer_with_global_attention_on_cls(exports):
    """The Longformer's first module gives [CLS] global attention (``modeling_doctune.py``, beside
    the model), so sentence-transformers embeds texts longer than the attention window (16 tokens
    here) as doctune does; its plain Transformer module, which gives no token global attention,
    does not."""
    from sentence_transformers import SentenceTransformer

    directory = exports["longformer"]
    modules = json.loads((directory / "modules.json").read_text())
    assert modules[0]["type"] == "modeling_doctune.GlobalAttentionTransformer"
    assert (directory / "modeling_doctune.py").is_file()
    long_texts = [" ".join([sentence] * 6) for sentence in SENTENCES]  # 60 to 100 tokens each
    expected = _doctune_embeddings(directory, "mean", long_texts)
    model = SentenceTransformer(str(directory), device="cpu", trust_remote_code=True)
    np.testing.assert_allclose(model.encode(long_texts, convert_to_numpy=True), expected, atol=1e-5)
    plain = json.loads((directory / "modules.json").read_text())
    plain[0]["type"] = "sentence_transformers.models.Transformer"
    (directory / "modules.json").write_text(json.dumps(plain))
    try:
        without = SentenceTransformer(str(directory), device="cpu").encode(long_texts, convert_to_numpy=True)
    finally:
        (directory / "modules.json").write_text(json.dumps(modules))
    assert np.abs(without - expected).max() > 1e-3
    card = (directory / "README.md").read_text()
    assert "trust_remote_code=True" in card and 'batch["global_attention_mask"][:, 0] = 1' in card


def test_by_default_the_best_trial_is_exported_even_when_the_baseline_ranks_first(run_dir, tmp_path):
    from transformers import AutoModel

    target = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "platform.export", str(run_dir), "--to", str(target)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads((run_dir / "leaderboard.json").read_text())["rows"][0]["trial"] == BASELINE_ID
    assert f"trial {TRIALS['mean']} (objective 0.8000) exported to {target}" in done.stdout
    assert json.loads((target / "doctune.json").read_text())["trial_id"] == TRIALS["mean"]
    assert not target.with_name("out.partial").exists()
    assert AutoModel.from_pretrained(target).config.hidden_size == 384


def test_export_best_replaces_the_run_directorys_best(run_dir):
    best = run_dir / "best"
    best.mkdir()
    (best / "stale.txt").write_text("from an earlier export")
    rows = Leaderboard.read(run_dir).rows
    exported = export_best(next(r for r in rows if r.trial == TRIALS["max"]), run_dir, RunFiles.at(run_dir))
    assert exported.path == best and exported.sentence_transformers_gap is None
    assert json.loads((best / "doctune.json").read_text())["trial_id"] == TRIALS["max"]
    assert not (best / "stale.txt").exists() and not (run_dir / "best.partial").exists()
    assert (best / "modules.json").exists() and (best / "README.md").exists()


def test_a_moved_run_directory_exports_from_its_own_trials(run_dir, tmp_path):
    moved = tmp_path / "moved"
    moved.mkdir()
    shutil.copy(run_dir / "search.json", moved)
    (moved / "trials").symlink_to(run_dir / "trials")
    board = json.loads((run_dir / "leaderboard.json").read_text())
    for record in board["rows"]:  # the leaderboard keeps the paths of where the search ran
        if record["trial"] in TRIALS.values():
            record["checkpoint"] = record["checkpoint"].replace(str(run_dir), "/gone/smoke")
    (moved / "leaderboard.json").write_text(json.dumps(board))
    assert export_main([str(moved), "--trial", TRIALS["cls"], "--to", str(tmp_path / "out")]) == 0
    assert json.loads((tmp_path / "out" / "doctune.json").read_text())["trial_id"] == TRIALS["cls"]


def _without_leaderboard(run_dir: Path, tmp_path: Path) -> list[str]:
    (tmp_path / "unfinished").mkdir()
    shutil.copy(run_dir / "search.json", tmp_path / "unfinished")
    return [str(tmp_path / "unfinished")]


def _checkpoint_gone(run_dir: Path, tmp_path: Path) -> list[str]:
    (tmp_path / "gone").mkdir()
    shutil.copy(run_dir / "search.json", tmp_path / "gone")
    board = json.loads((run_dir / "leaderboard.json").read_text())
    for record in board["rows"]:
        if record["checkpoint"] and record["trial"] != BASELINE_ID:
            record["checkpoint"] = str(tmp_path / "gone" / "elsewhere" / "step_000002")
    (tmp_path / "gone" / "leaderboard.json").write_text(json.dumps(board))
    return [str(tmp_path / "gone")]


def _target_not_empty(run_dir: Path, tmp_path: Path) -> list[str]:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("mine")
    return [str(run_dir)]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (lambda run, tmp: [str(tmp / "nowhere")], "does not exist"),
        (_without_leaderboard, "holds no leaderboard.json: its search has not finished"),
        (
            lambda run, tmp: [str(run), "--trial", "nope"],
            f"no trial 'nope' in {{run}}/leaderboard.json; known: {', '.join([*TRIALS.values(), ERRORED])}",
        ),
        (lambda run, tmp: [str(run), "--trial", BASELINE_ID], "is the untouched base model"),
        (lambda run, tmp: [str(run), "--trial", ERRORED], "has no checkpoint (error: RuntimeError: out of memory)"),
        (_checkpoint_gone, "no longer exists"),
        (_target_not_empty, "exists and is not an empty directory"),
    ],
    ids=["no-run-dir", "no-leaderboard", "unknown-trial", "baseline", "errored-trial", "checkpoint-gone", "to-taken"],
)
def test_bad_input_is_refused_with_one_message_and_nothing_written(run_dir, tmp_path, capsys, arguments, message):
    argv = arguments(run_dir, tmp_path)
    target = tmp_path / "out"
    before = sorted(p.name for p in target.iterdir()) if target.exists() else None
    assert export_main([*argv, "--to", str(target)]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert err.startswith("doctune: error: ") and err.count("\n") == 1
    assert message.format(run=run_dir) in err
    assert (sorted(p.name for p in target.iterdir()) if target.exists() else None) == before
    assert not target.with_name("out.partial").exists()


def test_the_command_line_exits_2_on_bad_input(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "platform.export", str(tmp_path / "nowhere"), "--to", str(tmp_path / "out")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "does not exist" in done.stderr and not (tmp_path / "out").exists()


def test_a_partial_export_left_by_this_run_is_replaced_and_anything_else_refused(run_dir, tmp_path, capsys):
    from platform.export import EXPORT_MARKER

    stray = tmp_path / "out.partial"
    stray.mkdir()
    (stray / "notes.txt").write_text("someone's files")
    assert export_main([str(run_dir), "--to", str(tmp_path / "out")]) == EXIT_BAD_INPUT
    assert "not left by a doctune export" in capsys.readouterr().err
    assert (stray / "notes.txt").read_text() == "someone's files" and not (tmp_path / "out").exists()
    (stray / EXPORT_MARKER).write_text(json.dumps({"run_dir": "/elsewhere/run"}))
    assert export_main([str(run_dir), "--to", str(tmp_path / "out")]) == EXIT_BAD_INPUT
    assert "an export of another run (/elsewhere/run)" in capsys.readouterr().err
    # what an interrupted export of this run leaves behind is replaced, and said
    (stray / EXPORT_MARKER).write_text(json.dumps({"run_dir": str(run_dir.resolve())}))
    assert export_main([str(run_dir), "--to", str(tmp_path / "out")]) == EXIT_OK
    assert "left by an interrupted export of this run" in capsys.readouterr().out
    assert not stray.exists() and not (tmp_path / "out" / "notes.txt").exists()
    assert not (tmp_path / "out" / EXPORT_MARKER).exists() and (tmp_path / "out" / "model.safetensors").exists()


def test_sentence_transformers_reads_interpolated_positions_as_doctune_does(minilm_dir, tmp_path):
    """A Longformer whose positions were interpolated (``position_init: interpolate``) reads them at
    a stride that depends on each text's length; the exported module (``position_interpolation.py``
    beside it) computes the same position ids, so a text of 700 tokens embeds as doctune embeds it;
    without them (positions numbered 0, 1, 2, ...) it does not."""
    from sentence_transformers import SentenceTransformer

    from doctune_core.longformer import cached_interpolated, cached_longformer
    from doctune_core.position_interpolation import CONFIG_KEY
    from platform.export.st_files import write_sentence_transformers_files

    directory = tmp_path / "interpolated"
    shutil.copytree(cached_interpolated(cached_longformer(minilm_dir, 1024, 16, tmp_path / "cache")), directory)
    config = json.loads((directory / "config.json").read_text())
    write_sentence_transformers_files(directory, POOLINGS["mean"], config, 1024)
    assert (directory / "position_interpolation.py").is_file()
    texts = [" ".join(SENTENCES * 5), SENTENCES[0]]  # about 700 tokens, and 14
    model, tokenizer = load_encoder(str(directory))
    expected = embed_texts(model, tokenizer, texts, pooling="mean", max_length=1024)
    got = SentenceTransformer(str(directory), device="cpu", trust_remote_code=True).encode(texts)
    np.testing.assert_allclose(got, expected, atol=1e-5)
    from platform.export.model_card import _usage

    snippet = _snippets("\n".join(_usage("mean", config, directory, 1024, None)))[1]  # the transformers one
    scope: dict = {}
    exec(snippet.replace(json.dumps(USAGE_TEXTS), json.dumps(texts)), scope)  # the model card's code, as a user runs it
    np.testing.assert_allclose(scope["embeddings"].numpy(), expected, atol=1e-5)
    del config[CONFIG_KEY]
    (directory / "config.json").write_text(json.dumps(config))
    without = SentenceTransformer(str(directory), device="cpu", trust_remote_code=True).encode(texts)
    assert np.abs(without[0] - expected[0]).max() > 1e-3
