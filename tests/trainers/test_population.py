"""Where a PBT trial goes on from: its last exploit's donor checkpoint until it has reported one of
its own past it (``trainers.population.resume_point``). The whole of PBT on a real search is
tests/platform/test_population.py."""

from __future__ import annotations

import json

from trainers.population import EXPLOITS_FILE, exploits, resume_point


def _checkpoint(run_dir, trial: str, step: int):
    path = run_dir / "trials" / trial / "checkpoints" / f"step_{step:06d}"
    path.mkdir(parents=True)
    (path / "doctune.json").write_text(json.dumps({"step": step, "trial_id": trial}))
    return path


def test_a_trial_goes_on_from_its_donor_until_it_has_a_checkpoint_of_its_own_past_the_exploit(tmp_path):
    own_2 = _checkpoint(tmp_path, "a", 2)
    donor_2 = _checkpoint(tmp_path, "b", 2)
    assert resume_point(str(tmp_path), "a", None) == (None, False)  # nothing reported, no exploit
    assert resume_point(str(tmp_path), "a", own_2) == (own_2, False)  # no exploit: its own latest
    assert exploits(tmp_path, "a") == []
    record = {"round": 1, "step": 2, "donor": "b", "donor_checkpoint": str(donor_2), "hyperparameters": {}}
    (tmp_path / "trials" / "a" / EXPLOITS_FILE).write_text(json.dumps([record]))
    assert resume_point(str(tmp_path), "a", own_2) == (donor_2, True)  # its own step 2 predates the exploit
    own_4 = _checkpoint(tmp_path, "a", 4)
    assert resume_point(str(tmp_path), "a", own_4) == (own_4, False)  # reported after it, from the donor's line
