"""What doctune runs and reads is safe by construction: no shell, nothing unpickled."""

from __future__ import annotations

import ast

import pytest

from tests.conftest import ROOT

PACKAGES = ("platform", "trainers", "evaluators")


def _calls(path):
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Call):
            yield node


@pytest.mark.parametrize("package", PACKAGES)
def test_no_code_path_hands_a_string_to_a_shell(package):
    offenders = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for call in _calls(path):
            name = ast.unparse(call.func)
            shell = any(k.arg == "shell" and ast.unparse(k.value) != "False" for k in call.keywords)
            if shell or name in ("os.system", "os.popen", "subprocess.getoutput", "subprocess.getstatusoutput"):
                offenders.append(f"{path.relative_to(ROOT)}:{call.lineno} {name}")
    assert offenders == []


@pytest.mark.parametrize("package", PACKAGES)
def test_nothing_is_unpickled(package):
    """Weights and optimizer state are safetensors, records JSON; ``torch.load`` and ``pickle``
    would run code from a file a checkpoint directory could hold."""
    offenders = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for call in _calls(path):
            name = ast.unparse(call.func)
            if name in ("torch.load", "pickle.load", "pickle.loads", "joblib.load"):
                offenders.append(f"{path.relative_to(ROOT)}:{call.lineno} {name}")
            # np.load refuses pickles unless allow_pickle=True is passed
            if any(k.arg == "allow_pickle" and ast.unparse(k.value) != "False" for k in call.keywords):
                offenders.append(f"{path.relative_to(ROOT)}:{call.lineno} allow_pickle")
    assert offenders == []


def test_a_checkpoint_holds_no_pickle(tmp_path, minilm_dir):
    import torch

    from doctune_core.encoder import load_encoder
    from trainers.checkpoint import load_training_state, save_checkpoint

    model, tokenizer = load_encoder(minilm_dir)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    model(**tokenizer(["a text"], return_tensors="pt")).last_hidden_state.sum().backward()
    optimizer.step()
    target = save_checkpoint(
        tmp_path / "step_000001",
        encoder=model,
        full_model=model,
        tokenizer=tokenizer,
        optimizer=optimizer,
        record={"step": 1},
        state={"step": 1, "eval_round": 1, "train_metrics": {}},
    )
    suffixes = {p.suffix for p in target.rglob("*") if p.is_file()}
    assert suffixes <= {".safetensors", ".json", ".txt"}, suffixes
    state = load_training_state(target, model, torch.optim.AdamW(model.parameters(), lr=1e-4))
    assert state["step"] == 1
