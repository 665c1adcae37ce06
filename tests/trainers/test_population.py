"""Where a PBT trial goes on from: its last exploit's donor checkpoint until it has reported one of
its own past it (``trainers.population.resume_point``), in a run directory and in a bucket. The
whole of PBT on a real search is tests/platform/test_population.py."""

from __future__ import annotations

from trainers.population import EXPLOITS_FILE, exploits, resume_point


def _checkpoint(run_files, trial: str, step: int) -> str:
    path = f"trials/{trial}/checkpoints/step_{step:06d}"
    run_files.write_json(f"{path}/doctune.json", {"step": step, "trial_id": trial})
    return path


def test_a_trial_goes_on_from_its_donor_until_it_has_a_checkpoint_of_its_own_past_the_exploit(run_files):
    own_2 = _checkpoint(run_files, "a", 2)
    donor_2 = _checkpoint(run_files, "b", 2)
    assert resume_point(run_files, "a", None) == (None, False)  # nothing reported, no exploit
    assert resume_point(run_files, "a", own_2) == (own_2, False)  # no exploit: its own latest
    assert exploits(run_files, "a") == []
    # recorded where the run was when the exploit happened: found by its name where the run is now
    elsewhere = f"/a/run/moved/since/{donor_2}"
    record = {"round": 1, "step": 2, "donor": "b", "donor_checkpoint": elsewhere, "hyperparameters": {}}
    run_files.write_json(f"trials/a/{EXPLOITS_FILE}", [record])
    assert resume_point(run_files, "a", own_2) == (donor_2, True)  # its own step 2 predates the exploit
    own_4 = _checkpoint(run_files, "a", 4)
    assert resume_point(run_files, "a", own_4) == (own_4, False)  # reported after it, from the donor's line
