"""The search space as Optuna samples it: conditional dimensions only where they apply."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import optuna
import pytest

from platform.spec import SpecError, load_spec, parse_spec
from platform.strategies.optuna_base import ConditionalSpace
from trainers.settings import TrialSettings

ROOT = Path(__file__).resolve().parents[2]


def _sample(space, n: int, seed: int = 0) -> list[dict]:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=seed))
    define = ConditionalSpace(space)
    trials = []
    for _ in range(n):
        trial = study.ask()
        define(trial)
        trials.append(dict(trial.params))
        study.tell(trial, 0.0)
    return trials


def test_recipe_parameters_are_drawn_only_in_that_recipes_trials():
    spec, _ = load_spec("all_recipes", "full")
    trials = _sample(spec.search.space, 120)
    assert {t["recipe"] for t in trials} == {"simcse", "docsplit", "deca", "laser"}
    for t in trials:
        assert ("split_probability" in t) == (t["recipe"] == "docsplit")
        assert ("augmentation" in t) == ("aug_p" in t) == (t["recipe"] == "deca")
        assert ("laser_mode" in t) == (t["recipe"] == "laser")
        assert ("elongation_max" in t) == (t["recipe"] in ("laser", "docsplit"))
        assert ("bregman_sigma" in t) == (t["bregman_k"] > 0)  # sigma only where the Bregman term is on
        assert 0.02 <= t["temperature"] <= 0.2 and "lr" in t


def test_sampled_values_respect_their_distributions():
    spec, _ = load_spec("laser_minilm", "full")
    for t in _sample(spec.search.space, 40):
        assert isinstance(t["elongation_max"], int) and 2 <= t["elongation_max"] <= 256
        assert t["laser_mode"] in ("self", "intra")


@pytest.mark.parametrize(
    ("space", "message"),
    [
        ({"aug_p": {"uniform": [0.1, 0.2], "when": {"recipe": "deca"}}}, "'recipe' is not a dimension searched before"),
        (
            {"recipe": {"choice": ["deca", "laser"]}, "aug_p": {"uniform": [0.1, 0.2], "when": {"recipe": "docsplit"}}},
            "never takes ['docsplit']",
        ),
        ({"recipe": {"choice": ["deca", "nope"]}}, "unknown recipe 'nope'"),
        ({"augmentation": {"choice": ["synonym", "ppdb"]}}, "PPDB database"),
        ({"loss": {"choice": ["simsiam"]}}, "loss simsiam needs at least 2 pairs per worker"),
    ],
)
def test_bad_conditional_spaces_are_refused(space, message):
    raw = {
        "name": "t",
        "search": {"objective": {"tasks": {"news-title-retrieval": 1.0}}, "space": space},
        "train": {"steps": 4, "eval_every": 2, "batch_size": 2, "workers": 2},
        "profiles": {"local": {"train": {"batch_size": 2}}, "smoke": {"train": {"batch_size": 2}}},
    }
    with pytest.raises(SpecError) as caught:
        parse_spec(raw, "full")
    assert message in str(caught.value)


def test_a_recipes_own_loss_is_checked_in_the_trials_that_draw_that_recipe():
    """No loss named: deca trials train with DECA's Eq. 4, which needs a negative, so two pairs a step."""
    single = {"train": {"batch_size": 1, "workers": 1}}
    raw = {
        "name": "t",
        "search": {
            "objective": {"tasks": {"news-title-retrieval": 1.0}},
            "space": {"recipe": {"choice": ["docsplit", "deca"]}},
        },
        "train": {"steps": 4, "eval_every": 2, **single["train"]},
        "profiles": {"local": single, "smoke": single},
    }
    with pytest.raises(SpecError, match="loss deca_ntxent needs at least 2 pairs per step"):
        parse_spec(raw, "full")
    raw["search"]["space"]["recipe"] = {"choice": ["docsplit", "laser"]}
    assert parse_spec(raw, "full").fixed_hyperparameters().loss is None  # each recipe's own: InfoNCE


SPLIT_TYPES, ELONGATION_TYPES = {"split", "split+elongation"}, {"split+elongation", "elongation"}
SIX_DIMENSIONS = ("views", "split_probability", "elongation_max", "temperature", "mlm_weight", "bregman_k")


@pytest.mark.parametrize("profile", ["full", "local", "smoke"])
def test_docsplit_long_searches_the_six_dimensions_from_the_long_studys_best_then_docsplits_setting(profile):
    spec, _ = load_spec("docsplit_long", profile)
    space = spec.search.space
    assert set(space) == {*SIX_DIMENSIONS, "lr"}
    for name, dist in space.items():  # every dimension can take two values or more, in every profile
        assert len(dist.values) >= 2 and (dist.kind != "choice" or len(set(dist.values)) >= 2), name
    # the long study's validation-best setting (docs/study.md): SimCSE's dropout views, nothing added
    assert spec.search.warm_start[0] == {
        "views": "dropout",
        "temperature": 0.05,
        "mlm_weight": 0.0,
        "bregman_k": 0,
        "lr": 5e-5,
    }
    assert spec.search.warm_start[1] == {
        "views": "split",
        "split_probability": 0.5,
        "temperature": 0.05,
        "mlm_weight": 0.1,
        "bregman_k": 0,
        "lr": 5e-5,
    }  # DocSplit Sec. 4.1 (SimDE Secs. 2.2, 3.1), the Bregman term off
    assert 0 in space["bregman_k"].values and any(k > 0 for k in space["bregman_k"].values)
    assert any(w > 0 for w in space["mlm_weight"].values)
    trials = _sample(space, 80)
    assert {t["views"] for t in trials} == {"dropout", "split", "split+elongation", "elongation", "word"}
    for t in trials:  # each type's own dimension only where it applies
        assert ("split_probability" in t) == (t["views"] in SPLIT_TYPES)
        assert ("elongation_max" in t) == (t["views"] in ELONGATION_TYPES)
        assert {"temperature", "mlm_weight", "bregman_k", "lr"} <= set(t)
    assert spec.recipes() == ("simcse", "docsplit", "laser", "deca")
    fixed = dataclasses.asdict(spec.fixed_hyperparameters())
    kinds = ("dropout", "split", "split+elongation", "elongation", "word")
    made = {v: TrialSettings(**{**fixed, "views": v}) for v in kinds}
    assert {v: (hp.recipe, hp.elongate) for v, hp in made.items()} == {
        "dropout": ("simcse", False),
        "split": ("docsplit", False),
        "split+elongation": ("docsplit", True),
        "elongation": ("laser", False),
        "word": ("deca", False),
    }


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"recipe": "laser"}, "recipe: search.space.views decides the recipe"),
        ({"hyperparameters": {"elongate": True}}, "hyperparameters.elongate: search.space.views decides"),
        ({"profiles": {"smoke": {"recipe": "deca"}}}, "(in the overrides of profile 'smoke')"),
    ],
)
def test_a_spec_gives_the_augmentation_type_or_the_recipe_not_both(extra, message):
    raw = {
        "name": "t",
        "search": {
            "objective": {"tasks": {"news-title-retrieval": 1.0}},
            "space": {"views": {"choice": ["split", "word"]}},
        },
        "train": {"steps": 4, "eval_every": 2, "batch_size": 2, "workers": 2},
        **extra,
    }
    with pytest.raises(SpecError) as caught:
        parse_spec(raw, "smoke")
    assert message in str(caught.value)


INTERRUPTED_RUN = """
import os, signal, sys, threading, time
import ray
from ray import tune
from doctune_core.run_files import RunFiles
from platform.search_path.tuner import finished

def count(config):
    for i in range(config["rounds"]):
        tune.report({"i": i})
        time.sleep(0.2)

def run(name, rounds, interrupt_after=None):
    if interrupt_after is not None:  # Ctrl-C while both trials run, as a user's
        threading.Timer(interrupt_after, os.kill, (os.getpid(), signal.SIGINT)).start()
    tuner = tune.Tuner(
        count,
        param_space={"rounds": rounds},
        tune_config=tune.TuneConfig(num_samples=2, max_concurrent_trials=2),
        run_config=tune.RunConfig(name=name, storage_path=sys.argv[1], verbose=0),
    )
    results = tuner.fit()
    in_memory = all(t.status == "TERMINATED" for t in results._experiment_analysis.trials)
    files = RunFiles.at(sys.argv[1])
    return finished(results, 2, files), finished(results, 3, files), in_memory

ray.init(num_cpus=2, include_dashboard=False)
print("completed", *run("completed", 3))
print("interrupted", *run("interrupted", 200, interrupt_after=8))
# restored by a call with -v, the saved run's console is the call's, not the saver's (verbose 0)
from doctune_core.logs import show_on_console
from platform.search_path.tuner import _restored
show_on_console(1)
restored = _restored(RunFiles.at(sys.argv[1]), "interrupted", count)
print("restored with -v: verbose", restored._local_tuner.get_run_config().verbose)
ray.shutdown()
"""


@pytest.mark.ray  # starts Ray
def test_an_interrupted_tune_run_is_not_taken_for_a_finished_one(tmp_path):
    """Tune saves an interrupted run's state with its trials RUNNING, then stops them and marks them
    TERMINATED in memory: only the saved state tells it from a finished run (a finished run of fewer
    trials than asked is not finished either). Read off real Tune runs in a fresh Ray."""
    env = {**os.environ, "RAY_ADDRESS": "local"}
    done = subprocess.run(
        [sys.executable, "-c", INTERRUPTED_RUN, str(tmp_path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = {line.split()[0]: line.split()[1:] for line in done.stdout.splitlines() if line.endswith(("True", "False"))}
    assert seen["completed"] == ["True", "False", "True"]
    assert seen["interrupted"] == ["False", "False", "True"]  # in memory, every trial looks ended
    assert "restored with -v: verbose None" in done.stdout  # Tune's own default console, as -v asks


@pytest.mark.parametrize("method", ["pbt", "pb2"])
def test_pbt_perturbs_only_what_a_trial_may_change_and_pb2_only_ranges(method):
    from ray.tune.schedulers import PopulationBasedTraining
    from ray.tune.schedulers.pb2 import PB2
    from ray.tune.search import BasicVariantGenerator

    from platform.strategies import strategy_for

    raw = {
        "name": "t",
        "search": {
            "objective": {"tasks": {"news-title-retrieval": 1.0}},
            "scheduler": {"pbt": {"method": method, "perturbation_interval": 2}},
            "space": {
                "lr": {"loguniform": [1.0e-5, 1.0e-4]},
                "mlm_weight": {"choice": [0.05, 0.1]},
                "pooling": {"choice": ["cls", "mean"]},
            },
            "warm_start": [{"lr": 5.0e-5, "mlm_weight": 0.1, "pooling": "mean"}],
        },
        "train": {"steps": 10, "eval_every": 5, "batch_size": 4, "workers": 2},
    }
    strategy = strategy_for("t", parse_spec(raw, "local").search, ("objective",), rounds=2, concurrent=True)
    generator, space, scheduler, stop = strategy.tune_parts(Path("unused"))
    assert strategy.population and stop == {"eval_round": 2}
    assert isinstance(generator, BasicVariantGenerator) and set(space) == {"lr", "mlm_weight", "pooling"}
    assert scheduler._synch and scheduler._perturbation_interval == 2 and scheduler._time_attr == "eval_round"
    if method == "pb2":
        assert isinstance(scheduler, PB2) and scheduler._hyperparam_bounds == {"lr": [1.0e-5, 1.0e-4]}
    else:
        assert isinstance(scheduler, PopulationBasedTraining) and not isinstance(scheduler, PB2)
        mutations = scheduler._hyperparam_mutations
        assert set(mutations) == {"lr", "mlm_weight"}  # pooling decides the model: kept
        assert mutations["mlm_weight"] == [0.05, 0.1]  # a choice moves to a neighbouring value
        # a perturbed range stays inside the spec's range (PBT multiplies by 0.8 or 1.2)
        explore = scheduler._custom_explore_fn
        assert explore({"lr": 1.2e-4, "mlm_weight": 0.1}) == {"lr": 1.0e-4, "mlm_weight": 0.1}
        assert explore({"lr": 0.8e-5})["lr"] == 1.0e-5


# Tune's saved state as a doctune from before platform/ was one folder per concern wrote it: its
# callbacks pickled by reference to a module that has since moved (GLOBAL opcode, protocol 4)
EARLIER_TUNER_STATE = b"\x80\x04cplatform.listeners\nTrialListener\n."


def test_a_run_an_earlier_doctune_saved_is_refused_before_ray_starts(tmp_path, capsys):
    import ray
    from ray import cloudpickle

    from doctune_core.run_files import RunFiles
    from platform import search
    from platform.rundir.tune_state import refuse_unreadable_state
    from platform.search_path.listeners import listening
    from tests.conftest import recorded_search

    run_dir = recorded_search(tmp_path / "run")
    record = json.loads((run_dir / "search.json").read_text())
    (run_dir / "search.json").write_text(json.dumps({**record, "environment": {"git_commit": "0da4b88"}}))
    saved = run_dir / "tune" / "smoke"
    saved.mkdir(parents=True)
    (saved / "tuner.pkl").write_bytes(cloudpickle.dumps({"_callbacks": [listening]}))  # this doctune's
    refuse_unreadable_state(RunFiles.at(run_dir), "")  # read back: accepted
    (saved / "searcher-state-2026-11-28_10-00-00.pkl").write_bytes(EARLIER_TUNER_STATE)
    before = {p: p.stat().st_mtime_ns for p in run_dir.rglob("*")}

    code = search.main(["smoke", "--profile", "smoke", "--run-dir", str(run_dir), "--resume"])

    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("doctune: error:")]
    assert code == 2 and len(errors) == 1, errors
    assert "started by an earlier doctune" in errors[0] and "searcher-state-2026-11-28_10-00-00.pkl" in errors[0]
    assert "platform.listeners" in errors[0] and "commit 0da4b88" in errors[0] and "platform.report" in errors[0]
    assert not ray.is_initialized() and before == {p: p.stat().st_mtime_ns for p in run_dir.rglob("*")}


def test_a_study_refuses_a_row_an_earlier_doctune_saved_where_it_would_restore_it(tmp_path):
    from platform import study
    from platform.exit_codes import UsageError
    from platform.spec import load_spec

    row = tmp_path / "runs" / "docsplit"
    (row / "tune" / "seeds-0-1").mkdir(parents=True)
    (row / "tune" / "seeds-0-1" / "tuner.pkl").write_bytes(EARLIER_TUNER_STATE)
    (row / "tune" / "notes.txt").write_text("a file: no Tune run")
    for seed in (0, 1):
        (row / f"seed{seed}").mkdir()
        (row / f"seed{seed}" / study.RESULT_FILE).write_text(json.dumps({"seed": seed}))
    unbuilt = study.Study.__new__(study.Study)  # what these two read first is the row's directory
    # every seed finished: read back, nothing restored, nothing refused
    assert unbuilt.trained_seeds("docsplit", {}, [0, 1], row) == {0: {"seed": 0}, 1: {"seed": 1}}
    (row / "seed1" / study.RESULT_FILE).unlink()
    refused = r"runs/docsplit: this run was started by an earlier doctune.*seeds-0-1.* another --run-dir$"
    with pytest.raises(UsageError, match=refused):
        unbuilt.trained_seeds("docsplit", {}, [0, 1], row)
    # a tuned row's search
    spec = load_spec("seed_study", "smoke")[0]
    search_dir = tmp_path / "runs" / "docsplit (tuned)" / "seed0"
    (search_dir / "tune" / spec.name).mkdir(parents=True)
    (search_dir / "tune" / spec.name / "tuner.pkl").write_bytes(EARLIER_TUNER_STATE)
    with pytest.raises(UsageError, match=r"docsplit \(tuned\)/seed0: this run was started by an earlier doctune"):
        unbuilt.trial(spec, search_dir)
