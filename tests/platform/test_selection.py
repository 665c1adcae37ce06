"""Select on validation, report on test: what ranks trials, picks their checkpoints and ``best/``."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from doctune_core.run_files import RunFiles
from evaluators.leaderboard import write_leaderboard
from evaluators.plan import EvalBudget, EvalPlan
from evaluators.references import winner
from evaluators.scores import flatten
from platform.results.leaderboard import baseline_row, rows_from_results
from platform.results.text import format_table
from trainers.settings import TrialSettings

PLAN = EvalPlan(
    objectives={"objective": {"a": 1.0, "b": 1.0}},
    actor_names=("e",),
    namespace="n",
    budget=EvalBudget(),
    max_length=64,
    batch_size=8,
    threads=1,
)
# a run directory holding no trial records (no PBT lineage): the rows come from the Tune results alone
RESOLVED = SimpleNamespace(
    evaluation=PLAN,
    train_plan=SimpleNamespace(eval_rounds=2, run_files=RunFiles.at("no-run-dir")),
    fixed=TrialSettings(),
    run_dir=Path("no-run-dir"),
)


def _scores(val: float, test: float) -> dict:
    return {task: {"val": {"main": val, "main_se": 0.01}, "test": {"main": test, "main_se": 0.01}} for task in "ab"}


def _round(trial: str, step: int, val: float, test: float) -> dict:
    return {
        "trial_id": trial,
        "step": step,
        "eval_round": step // 2,
        "checkpoint": f"/runs/x/trials/{trial}/checkpoints/step_{step:06d}",
        "objective": val,
        "test_objective": test,
        **flatten(_scores(val, test)),
    }


def _result(trial: str, rounds: list[tuple[float, float]]):
    frame = pd.DataFrame([_round(trial, 2 * (i + 1), val, test) for i, (val, test) in enumerate(rounds)])
    return SimpleNamespace(path=f"/tune/{trial}", metrics_dataframe=frame, config={"lr": 1e-4}, error=None)


def test_the_winner_and_its_checkpoint_are_chosen_on_validation_and_reported_on_test(tmp_path):
    results = [
        # validation prefers "steady" (and its second round); test would prefer "lucky" and round 1
        _result("steady", [(0.70, 0.90), (0.80, 0.60)]),
        _result("lucky", [(0.65, 0.95), (0.60, 0.97)]),
    ]
    rows = rows_from_results(results, RESOLVED)
    steady = next(r for r in rows if r.trial == "steady")
    assert (steady.objective, steady.test_objective, steady.step) == (0.80, 0.60, 4)
    assert steady.checkpoint.endswith("step_000004") and steady.test_score("a") == 0.60
    base = baseline_row("baseline", "base model, untouched", "/models/base", _scores(0.75, 0.99), RESOLVED)
    ranked = write_leaderboard([base, *rows], tmp_path, ["a", "b"])
    assert [r.trial for r in ranked] == ["steady", "baseline", "lucky"]  # by validation only
    assert winner(ranked).trial == "steady"
    table = format_table(ranked, ["a", "b"])
    assert "objective (val)" in table and "a (test)" in table and "0.6000±0.0100" in table


def test_rounds_that_read_validation_only_give_rows_with_no_test_score_until_one_is_read(tmp_path):
    """A search's rounds score validation alone: a row's test objective is empty, and the table and
    the coverage lines still read, until the locked part is read for the winner."""
    from platform.results.text import coverage_lines

    frame = pd.DataFrame([_round("steady", 2, 0.8, 0.0)]).drop(columns="test_objective")
    frame = frame.drop(columns=[c for c in frame.columns if c.startswith("test/")])
    result = SimpleNamespace(path="/tune/steady", metrics_dataframe=frame, config={"lr": 1e-4}, error=None)
    (row,) = rows_from_results([result], RESOLVED)
    assert row.objective == 0.8 and row.test_objective is None and all("test" not in s for s in row.scores.values())
    base = baseline_row("baseline", "base model, untouched", "/models/base", _scores(0.75, 0.99), RESOLVED)
    base.scores["a"]["test"] |= {"documents": 5, "documents_total": 9}
    row.scores["a"]["val"] |= {"documents": 4, "documents_total": 9}
    ranked = write_leaderboard([base, row], tmp_path, ["a", "b"])
    assert [r.trial for r in ranked] == ["steady", "baseline"]
    assert format_table(ranked, ["a", "b"]).splitlines()[1].split()[3] == "-"  # the trial's test objective
    (line,) = coverage_lines(ranked, ["a"])  # each part from the first row scored on it
    assert line.startswith("a: val 4 of 9 documents") and "; test 5 of 9 documents" in line


def test_a_reference_row_has_an_objective_only_where_it_scored_every_task_and_never_wins(tmp_path):
    rows = rows_from_results([_result("steady", [(0.70, 0.60)])], RESOLVED)
    lexical = {"a": _scores(0.95, 0.93)["a"]}  # a retrieval task only, as BM25 scores
    bm25 = baseline_row("reference-bm25", "reference: BM25", None, lexical, RESOLVED)
    assert bm25.objective is None and bm25.test_objective is None and bm25.objectives == {}
    as_users = baseline_row("reference-off-the-shelf", "reference: the base", "/m", _scores(0.9, 0.8), RESOLVED)
    ranked = write_leaderboard([bm25, as_users, *rows], tmp_path, ["a", "b"])
    assert [r.trial for r in ranked] == ["reference-off-the-shelf", "steady", "reference-bm25"]
    assert winner(ranked).trial == "steady"  # a reference ranks, but is no trial
    assert "reference-bm25" in format_table(ranked, ["a", "b"])


@pytest.mark.parametrize(
    ("directory", "trial_id"),
    [
        ("run_trial_5e89619d_2_bregman_k=10,lr=0.0003_2026-11-26_21-05-38", "5e89619d"),  # a searcher's ID
        ("run_trial_3d6d1_00002_2_lr=0.0040,temperature=0.0310_2026-11-26_23-10-02", "3d6d1_00002"),  # Tune's own
        ("run_trial_3d6d1_10000_10000_2026-11-26_23-10-02", "3d6d1_10000"),  # no parameters in the name
        ("run_trial_5e89619d_10000_2026-11-26_23-10-02", "5e89619d"),
    ],
)
def test_a_trial_that_failed_before_its_first_report_is_named_by_its_id(directory, trial_id):
    """Its reports name a trial; one with none is named from its Tune directory, not by it."""
    failed = SimpleNamespace(
        path=f"/tune/search/{directory}", metrics_dataframe=None, config={"lr": 3e-4}, error=RuntimeError("oom")
    )
    (row,) = rows_from_results([failed], RESOLVED)
    assert (row.trial, row.status) == (trial_id, "error: oom")


@pytest.mark.parametrize("rounds", [[(0.5, 0.1)], [(0.4, 0.9), (0.5, 0.1)]])
def test_a_test_score_never_changes_what_is_chosen(rounds):
    """Change only the test scores: the choice is the same."""
    chosen = rows_from_results([_result("t", rounds)], RESOLVED)[0]
    flipped = rows_from_results([_result("t", [(v, 1 - t) for v, t in rounds])], RESOLVED)[0]
    assert (chosen.step, chosen.objective) == (flipped.step, flipped.objective)


def test_the_confirmation_reports_the_new_seeds_alone_and_the_winners_own_run_apart():
    """The winner's own run was chosen as the best of the search, so its test objective is biased
    upwards (the winner's curse): mean ± std over the new seeds only."""
    from evaluators.leaderboard import LeaderboardRow
    from platform.results.leaderboard import confirmation_record
    from platform.results.text import describe_confirmation

    winner_row = LeaderboardRow("lucky", "completed", 0.95, 4, None, {}, test_objective=0.90)
    new = {
        seed: LeaderboardRow(f"confirm-{seed}", "completed", 0.7, 4, None, {}, test_objective=t)
        for seed, t in ((1, 0.6), (2, 0.7))
    }
    record = confirmation_record(winner_row, 0, new, planned=3)
    assert record["test_objective"]["mean"] == pytest.approx(0.65)  # with the winner's own run: 0.733
    assert record["test_objective"]["std"] == pytest.approx(0.0707107, rel=1e-5)  # sample std of 0.6, 0.7
    assert record["test_objective"]["n"] == 2 and record["failed"] == 1
    assert record["winner"] == {"seed": 0, "trial": "lucky", "objective": 0.95, "test_objective": 0.90}
    assert set(record["seeds"]) == {"1", "2"}
    text = describe_confirmation(record)
    assert "2 new training seeds, 1 more failed: test objective 0.6500 ± 0.0707" in text
    assert "own run, chosen as the best, 0.9000 apart" in text
    one = confirmation_record(winner_row, 0, {1: new[1]}, planned=1)
    assert "1 new training seed: test objective 0.6000;" in describe_confirmation(one)
    none = confirmation_record(winner_row, 0, {}, planned=2)
    assert none["test_objective"]["n"] == 0 and "every run failed (2)" in describe_confirmation(none)


def test_with_two_confirmation_runs_the_gains_are_their_mean_with_the_seeds_term():
    """``search.confirm_seeds`` >= 2: the gain over a baseline is the confirmation runs' mean paired
    gain (the configuration's), not the winner's own run's, which was chosen for its score."""
    from doctune_core.outcomes import Outcomes, mean_of_rows
    from evaluators.leaderboard import LeaderboardRow
    from platform.results.leaderboard import confirmation_record
    from platform.results.winner import compare_with_baselines

    rng = np.random.default_rng(0)
    base = rng.uniform(0.2, 0.8, 300)
    items = {"base": base, "lucky": base + 0.2} | {
        f"ckpt-{seed}": base + gain + rng.normal(0, 0.05, 300) for seed, gain in ((1, 0.03), (2, 0.05))
    }

    def outcomes(row, split):
        assert split == "test"
        values = items[row.checkpoint]
        return {task: Outcomes({"main": float(values.mean())}, values, mean_of_rows) for task in outcomes.weights}

    outcomes.weights = {"news-title-retrieval": 1.0, "needle-retrieval": 1.0}
    baseline = LeaderboardRow("baseline", "baseline", 0.5, None, "base", {"pooling": "mean"})
    winner_row = LeaderboardRow("lucky", "completed", 0.95, 4, "lucky", {"pooling": "mean"}, test_objective=0.7)
    runs = {
        seed: LeaderboardRow(
            f"confirm-{seed}", "completed", 0.7, 4, f"ckpt-{seed}", {"pooling": "mean"}, test_objective=0.5
        )
        for seed in (1, 2)
    }
    winner_row.confirmation = confirmation_record(winner_row, 0, runs, planned=2)
    compare_with_baselines(winner_row, [baseline], outcomes)
    gain = winner_row.gains["baseline"]
    assert gain.runs == 2 and gain.seed_noise
    assert gain.difference == pytest.approx(np.mean([items[f"ckpt-{s}"].mean() - base.mean() for s in (1, 2)]))
    assert "the mean of 2 training runs" in gain.describe()
    assert winner_row.long_task_gains["baseline"].runs == 2  # the long tasks pooled too
    # one confirmation run: the winner's own run's gain, seed noise not measured
    winner_row.confirmation = confirmation_record(winner_row, 0, {1: runs[1]}, planned=1)
    compare_with_baselines(winner_row, [baseline], outcomes)
    alone = winner_row.gains["baseline"]
    assert alone.runs == 1 and alone.difference == pytest.approx(0.2) and not alone.seed_noise


def test_the_seeds_spread_of_any_score_comes_from_the_confirmation_runs_own_scores():
    """Each confirmation run keeps its scores, so a task's, a length bucket's or a weighted mean of
    tasks' seed spread can be measured (the winner's own run left out), with its number of runs; a
    score the runs did not read (a report-only task's test part) has none."""
    from evaluators.leaderboard import LeaderboardRow
    from platform.results.leaderboard import confirmation_record
    from platform.results.ranking import seed_spread

    winner_row = LeaderboardRow("lucky", "completed", 0.95, 4, None, {}, test_objective=0.90)
    runs = {
        seed: LeaderboardRow(
            f"confirm-{seed}",
            "completed",
            0.7,
            4,
            None,
            {},
            scores={"x": {"test": {"main": x, "len_upto512": x - 0.1}}, "y": {"test": {"main": y}}},
            test_objective=(x + y) / 2,
        )
        for seed, (x, y) in ((1, (0.6, 0.2)), (2, (0.7, 0.2)), (3, (0.8, 0.5)))
    }
    winner_row.confirmation = confirmation_record(winner_row, 0, runs, planned=3)
    x = seed_spread(winner_row, {"x": 1.0})
    assert x.runs == 3 and x.sd == pytest.approx(0.1)
    assert seed_spread(winner_row, {"x": 1.0}, label="len_upto512").sd == pytest.approx(0.1)
    both = seed_spread(winner_row, {"x": 1.0, "y": 3.0})  # (x + 3 y) / 4 per run: 0.3, 0.325, 0.575
    assert both.sd == pytest.approx(np.std([0.3, 0.325, 0.575], ddof=1))
    assert seed_spread(winner_row, {"y": 1.0}, label="len_upto512") is None
    assert seed_spread(winner_row, {"x": 1.0}, split="val") is None
    assert seed_spread(LeaderboardRow("plain", "completed", 0.9, 4, None, {}), {"x": 1.0}) is None
