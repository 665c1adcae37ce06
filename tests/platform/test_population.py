"""Population Based Training (``search.scheduler.pbt``) on a real search: three trials of two
rounds, one perturbation round between them. The bottom trial goes on from the top trial's
checkpoint, reached through the Tune checkpoints the trials report (``trainers.population``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from safetensors.torch import load_file

from tests.conftest import FEW_ITEMS, patched_search_env, run_smoke_search, spec_variant
from trainers.checkpoint import weights_digest

pytestmark = pytest.mark.ray  # runs a search


def _digest(checkpoint) -> str:
    """The digest of a checkpoint's saved encoder (kept for every round: train.keep_checkpoints: all)."""
    return weights_digest(load_file(str(checkpoint / "model.safetensors")))


def test_pbt_exploits_a_top_trials_checkpoint_and_the_leaderboard_shows_the_lineage(tmp_path):
    changes = {
        "search.samples": 3,
        "search.scheduler": {"asha": None, "pbt": {"perturbation_interval": 1}},
        "search.space": {"temperature": {"loguniform": [0.02, 0.2]}, "lr": {"loguniform": [1.0e-5, 1.0e-2]}},
        "search.warm_start": [],
        "train.workers": 1,
        "train.keep_checkpoints": "all",
        "evaluation.limits": FEW_ITEMS,
    }
    spec = spec_variant("smoke", tmp_path, **changes)
    run_dir = tmp_path / "run"
    # the third trial's loss becomes NaN before its first round: it ends as errored, and synchronous
    # PBT must not wait for it at the perturbation round (Tune keeps an errored trial among its live ones)
    done = run_smoke_search(
        spec, run_dir, env=patched_search_env(nan_at_step=1, nan_trial_suffix="_00002"), timeout=1200
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "doctune: scheduler: PBT (synchronous) over 3 trial(s)" in done.stdout
    rows = {r["trial"]: r for r in json.loads((run_dir / "leaderboard.json").read_text())["rows"]}
    errored = {name: row for name, row in rows.items() if row["status"].startswith("error")}
    ((name, row),) = errored.items()
    assert "_00002" in name and "loss became nan at step 1" in row["status"], errored
    trials = {name: row for name, row in rows.items() if name != "baseline" and name not in errored}
    assert len(trials) == 2 and all(row["status"] == "completed" for row in trials.values()), trials
    exploited = {name: row["lineage"] for name, row in trials.items() if row["lineage"]}
    assert exploited, "no trial went on from another's checkpoint"
    for name, lineage in exploited.items():
        (exploit,) = lineage  # one perturbation round: one exploit at most
        donor = exploit["donor"]
        assert donor in trials and donor != name and (exploit["round"], exploit["step"]) == (1, 2)
        donor_checkpoint = run_dir / "trials" / donor / "checkpoints" / "step_000002"
        assert exploit["donor_checkpoint"] == str(donor_checkpoint.resolve())
        # the trial went on with the donor's weights, not its own of the same step
        own = run_dir / "trials" / name / "checkpoints" / "step_000002"
        assert exploit["weights_sha256"] == _digest(donor_checkpoint) != _digest(own)
        # and with the donor's configuration perturbed (PBT's x0.8 / x1.2, or drawn anew)
        for key in ("lr", "temperature"):
            assert exploit["hyperparameters"][key] != trials[donor]["hyperparameters"][key]
            assert trials[name]["hyperparameters"][key] == pytest.approx(exploit["hyperparameters"][key])
        steps = sorted(p.name for p in (run_dir / "trials" / name / "checkpoints").glob("step_*"))
        assert steps == ["step_000002", "step_000004"]  # its own round before the exploit, the donor's line after
        assert f"round 1: from {donor} (step 2)" in (run_dir / "leaderboard.csv").read_text()
    # the trials reported Tune checkpoints, each naming its round's checkpoint in the run directory
    pointers = [json.loads(p.read_text()) for p in (run_dir / "tune").glob("*/*/checkpoint_*/doctune_checkpoint.json")]
    for name in trials:  # each completed trial reported both rounds with one
        rounds = {p["eval_round"] for p in pointers if p["trial"] == name}
        # except a receiver exploited as its round-1 report arrived (the last to reach the round): Ray
        # pauses it without saving, so its round-2 pointer takes the round-1 one's place (its doctune
        # checkpoint of round 1 stays, checked above)
        assert rounds == {1, 2} or (name in exploited and rounds == {2}), (name, rounds)
    assert all(Path(p["checkpoint"]).parent.parent.name == p["trial"] for p in pointers)
    report = (run_dir / "report.html").read_text()
    assert "PBT lineage" in report and f"round 1: from {exploit['donor']}" in report
