"""doctune from Python (doctune/api.py), called as a notebook would: outside the checkout, after the
standard library's ``platform`` module was imported. The in-process search, from the installed
wheel, is bregman_longformer's smoke search in tests/test_search_smoke.py."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import ROOT, outside_the_checkout

NOTEBOOK = """
import json, sys
import platform
standard = sys.modules["platform"]
import doctune
from evaluators.plan import EvalBudget

spec = doctune.load_spec("smoke", profile="smoke")
loaded_twice = doctune.load_spec("docsplit_long", profile="full").name
try:
    doctune.load_spec("no_such_spec")
except doctune.BadInput as err:
    refused = str(err)
budget = EvalBudget(max_documents=60, max_queries=30)
scores = doctune.evaluate("all-minilm-l6-v2", ["news-title-retrieval"], max_length=64, budget=budget).scores
print("API", json.dumps({
    "spec": [spec.name, type(spec).__module__, loaded_twice],
    "refused": refused,
    "standard_platform": sys.modules["platform"] is standard and platform.system() != "",
    "scores": scores,
}))
"""


def test_a_spec_and_an_encoders_scores_from_python_leave_the_standard_platform_module_in_place(tmp_path):
    done = outside_the_checkout([sys.executable, "-c", NOTEBOOK], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("API ")]
    found = json.loads(line.removeprefix("API "))
    assert found["spec"] == ["smoke", "platform.spec.schema", "docsplit_long"]
    assert found["refused"].startswith("spec 'no_such_spec' not found")
    assert found["standard_platform"]
    # the same scores as the command line's for the same settings
    out = tmp_path / "cli.json"
    command = [sys.executable, "-m", "evaluators", "--model", "all-minilm-l6-v2", "--task", "news-title-retrieval"]
    limits = ["--max-documents", "60", "--max-queries", "30", "--max-length", "64", "--json", str(out)]
    cli = subprocess.run([*command, *limits], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert cli.returncode == 0, cli.stderr[-3000:]
    assert found["scores"] == json.loads(out.read_text())["scores"]
