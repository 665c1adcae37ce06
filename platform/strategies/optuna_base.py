"""The Optuna side of a search, shared by the strategies that let Optuna choose the trials
(``optuna_asha``, ``optuna_only``): the define-by-run space, the sampler sized to the budget
(``samplers``) and the Optuna study kept in the run directory."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from doctune_core.run_layout import OPTUNA_JOURNAL
from platform.spec.schema import Distribution
from platform.strategies.base import SearchStrategy
from platform.strategies.samplers import SamplerPlan, make_sampler


class ConditionalSpace:
    """Optuna define-by-run search space: dimensions in spec order, each sampled only when its
    ``when`` condition holds for the values drawn before it (so a recipe's parameters are drawn
    only in trials of that recipe). A class, not a closure, so Tune can save it with the search."""

    def __init__(self, space: dict[str, Distribution]) -> None:
        self.space = space

    def __call__(self, trial) -> None:
        chosen: dict = {}
        for name, dist in self.space.items():
            if not dist.applies(chosen):
                continue
            if dist.kind == "choice":
                chosen[name] = trial.suggest_categorical(name, list(dist.values))
            elif dist.kind == "int":
                chosen[name] = trial.suggest_int(name, *dist.values)
            else:
                chosen[name] = trial.suggest_float(name, *dist.values, log=dist.kind == "loguniform")


@dataclass(frozen=True)
class OptunaPlan:
    """Optuna's study over the searched space: its sampler (NSGA-II for several objectives), the
    metrics it maximises (one, or one per objective), the warm starts it tries first."""

    study_name: str
    space: dict[str, Distribution]
    sampler: SamplerPlan
    seed: int
    metrics: tuple[str, ...]
    # only as many warm starts as trials: Optuna enqueues each, and one past the last trial would
    # stay in the Optuna study as a trial that never ran
    warm_start: tuple[dict, ...] = field(default=())

    def searcher(self, run_dir: Path):
        """Ray Tune's ``OptunaSearch`` for this Optuna study, its journal in ``run_dir``."""
        from ray.tune.search.optuna import OptunaSearch

        several = len(self.metrics) > 1
        return OptunaSearch(
            space=ConditionalSpace(self.space),
            metric=list(self.metrics) if several else self.metrics[0],
            mode=["max"] * len(self.metrics) if several else "max",
            sampler=make_sampler(self.sampler, self.space, self.seed),
            points_to_evaluate=[dict(point) for point in self.warm_start] or None,
            study_name=self.study_name,
            storage=optuna_storage(run_dir),
        )


class OptunaStrategy(SearchStrategy):
    """A strategy whose trials Optuna draws (none without a searched space: Tune runs the samples)."""

    optuna: OptunaPlan | None

    def describe(self) -> str | None:
        return f"sampler: {self.optuna.sampler.describe()}" if self.optuna else None

    def warning(self) -> str | None:
        return self.optuna.sampler.warning() if self.optuna else None

    def after_search(self, run_dir: Path) -> str | None:
        if self.optuna and (zombies := fail_unfinished_optuna_trials(run_dir, self.optuna.study_name)):
            return (
                f"note: {zombies} Optuna trial(s) a killed search left RUNNING were never reported; "
                "marked failed in the Optuna study"
            )
        return None

    def searcher(self, run_dir: Path):
        return self.optuna.searcher(run_dir) if self.optuna else None


def optuna_storage(run_dir: Path):
    """The Optuna study's storage: a journal file in the run dir (``optuna-dashboard RUN_DIR/optuna.journal``)."""
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    return JournalStorage(JournalFileBackend(str((run_dir / OPTUNA_JOURNAL).resolve())))


def fail_unfinished_optuna_trials(run_dir: Path, name: str) -> int:
    """Mark FAIL every trial the Optuna study still holds as RUNNING once the search has ended, and return
    how many. A driver killed between Optuna's suggestion and Tune's record of the trial leaves one
    behind that no resumed Tune trial will ever report; left RUNNING, TPE's constant liar would keep
    treating it as under way, and optuna-dashboard would show it running forever."""
    import optuna

    storage = optuna_storage(run_dir)
    try:
        study_id = storage.get_study_id_from_name(name)
    except KeyError:
        return 0
    running = storage.get_all_trials(study_id, deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))
    for trial in running:
        storage.set_trial_state_values(trial._trial_id, optuna.trial.TrialState.FAIL)
    return len(running)
