from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # no test may reach a model hub
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parent.parent
SHARED_IR = ROOT.parent / "shared" / "data" / "ir"


def shared_collection(name: str) -> Path:
    """A retrieval collection from the developers' shared data; tests that need it skip without it."""
    path = SHARED_IR / name
    if not (path / "corpus.jsonl").exists():
        pytest.skip(f"the shared retrieval collection {name!r} is absent ({path}); it is development data only")
    return path


@pytest.fixture(scope="session")
def minilm_dir() -> str:
    from trainers.encoder import resolve_model

    return resolve_model("all-minilm-l6-v2")
