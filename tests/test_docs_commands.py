"""Every module command the docs and the README tell a reader to run (``python -m MODULE``) exists
and answers ``--help`` (its usage; the spec's reference generator prints the reference): a module
that moved or went, still named in the docs, fails here."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def named_commands() -> list[str]:
    """The modules the docs run as ``python -m MODULE``, each once."""
    found = {m for doc in DOCS for m in re.findall(r"python -m ([a-z_][\w.]*[a-z_])\b", doc.read_text())}
    return sorted(found)


def test_the_docs_name_the_commands_a_reader_runs():
    assert {"platform.search", "platform.cluster.quota", "doctune_core.data.prefetch"} <= set(named_commands())


@pytest.mark.parametrize("module", named_commands())
def test_each_command_the_docs_name_answers_help(module):
    done = subprocess.run(
        [sys.executable, "-m", module, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and done.stdout, f"{module}: {done.stderr[-1500:]}"
