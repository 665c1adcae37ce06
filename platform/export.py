"""``python -m platform.export RUN_DIR [--trial ID] --to DIR``

Exports one trial of a finished search: its encoder as an ordinary transformers model directory
that sentence-transformers also loads with the trial's pooling and L2 normalisation, plus
``doctune.json`` (what it is) and ``README.md`` (a model card). The search exports its winner to
``RUN_DIR/best`` with the same code (``export_best``). Exit codes: 0 success, 2 bad input (one
message naming what is wrong and how to fix it; nothing written), 1 any other failure.

The sentence-transformers files are written here, in the format its releases from 3.0 on read;
sentence-transformers itself is not imported.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from evaluators.noise import Gain
from evaluators.scores import part
from platform.report import Row, is_baseline, score_with_error, winner
from platform.search import EXIT_BAD_INPUT, EXIT_OK
from platform.spec import SPACES_DIR

# The texts the model card's usage snippets embed (the tests run the snippets on them).
USAGE_TEXTS = ["A first document.", "A second, longer document about something else."]


class ExportError(ValueError):
    """Bad export input (run directory, trial, target); the message says what and how to fix it."""


@dataclass(frozen=True)
class PoolingExport:
    """How one of doctune's poolings (``trainers.encoder.pool``) is written outside doctune."""

    st_flag: str  # the sentence-transformers Pooling flag that computes the same vector
    torch_expression: str  # the same pooling over ``hidden`` (N, L, d) and ``mask`` (N, L, 1), for the card


# Every pooling trainers.encoder.pool offers, each with its exact sentence-transformers equivalent
# (tests/platform/test_export.py compares the embeddings). A pooling missing here gets no
# sentence-transformers files rather than wrong ones.
POOLINGS: dict[str, PoolingExport] = {
    "mean": PoolingExport("pooling_mode_mean_tokens", "(hidden * mask).sum(1) / mask.sum(1)"),
    "cls": PoolingExport("pooling_mode_cls_token", "hidden[:, 0]"),
    "max": PoolingExport("pooling_mode_max_tokens", 'hidden.masked_fill(mask == 0, float("-inf")).max(1).values'),
}
# sentence-transformers 3.x reads these flags (later releases convert them); all are written, one true
ST_POOLING_FLAGS = (
    "pooling_mode_cls_token",
    "pooling_mode_mean_tokens",
    "pooling_mode_max_tokens",
    "pooling_mode_mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens",
    "pooling_mode_lasttoken",
)


@dataclass(frozen=True)
class SearchRecord:
    """What an export says about the search its trial came from (read from ``search.json``)."""

    name: str
    spec: str  # the spec file the search ran
    profile: str
    base_model: str  # as the spec names it
    corpus: str
    objectives: dict[str, dict[str, float]]  # objective name -> (task -> weight); the first ranks
    searched: tuple[str, ...]  # the hyperparameters the search varied
    max_length: int  # tokens per text when the trials were scored (evaluation.max_length)
    run_dir: str = ""  # where the search's run directory was when the export was made

    @classmethod
    def read(cls, run_dir: Path) -> SearchRecord:
        summary = json.loads((run_dir / "search.json").read_text())
        spec = summary["resolved_spec"]
        return cls(
            run_dir=str(run_dir.resolve()),
            name=spec["name"],
            spec=summary["spec"],
            profile=summary["profile"],
            base_model=spec["base_model"],
            corpus=spec["corpus"]["source"],
            objectives=dict(spec["search"]["objective"].get("objectives") or {})
            or {"objective": dict(spec["search"]["objective"]["tasks"])},
            searched=tuple(spec["search"]["space"]),
            max_length=int(spec["evaluation"]["max_length"]),
        )

    @property
    def command(self) -> str:
        """The command that runs this search again (a spec in search_spaces/ by its name)."""
        spec = Path(self.spec)
        argument = spec.stem if spec.resolve().parent == SPACES_DIR.resolve() else str(spec)
        return f"python -m platform.search {shlex.quote(argument)} --profile {shlex.quote(self.profile)}"


@dataclass(frozen=True)
class Exported:
    """Where an export went, and whether sentence-transformers can load it."""

    path: Path
    # why sentence-transformers cannot load this encoder as doctune embeds it; None when it can
    sentence_transformers_gap: str | None


def export_best(row: Row, run_dir: Path) -> Exported:
    """The search's winner to ``run_dir/best`` (replacing an earlier export there)."""
    return export_trial(row, SearchRecord.read(run_dir), run_dir / "best")


def export_trial(row: Row, search: SearchRecord, target: Path, checkpoint: Path | None = None) -> Exported:
    """Write ``row``'s checkpoint (or ``checkpoint``, where it has moved) as an exported encoder at ``target``.

    Everything is written under ``<target>.partial`` and renamed at the end, so a directory named
    ``target`` is always whole; an existing ``target`` is replaced. An existing ``<target>.partial``
    is removed only when it is what an interrupted export of this same run left (it carries a
    marker naming the run directory); anything else there is refused with ``ExportError``.
    """
    source = Path(checkpoint or row.checkpoint)
    partial = target.with_name(target.name + ".partial")
    _clear_leftover(partial, search)
    try:
        partial.mkdir(parents=True)
        (partial / EXPORT_MARKER).write_text(json.dumps({"run_dir": search.run_dir, "trial": row.trial}))
        shutil.copytree(source, partial, ignore=shutil.ignore_patterns("training_state"), dirs_exist_ok=True)
        record = json.loads((partial / "doctune.json").read_text())
        record |= {
            "trial_id": row.trial,
            "objective": row.objective,
            "scores": row.scores,
            "base_model": search.base_model,
            "corpus": search.corpus,
            "spec": search.spec,
            "profile": search.profile,
            "objectives": search.objectives,
        }
        (partial / "doctune.json").write_text(json.dumps(record, indent=2, sort_keys=True))
        config = json.loads((partial / "config.json").read_text())
        gap = sentence_transformers_gap(record["pooling"], config.get("model_type", ""))
        if gap is None:
            _write_sentence_transformers_files(partial, POOLINGS[record["pooling"]], config, search.max_length)
        card = model_card(row, record, search, config.get("model_type", ""), target.resolve(), gap)
        (partial / "README.md").write_text(card)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    (partial / EXPORT_MARKER).unlink()
    shutil.rmtree(target, ignore_errors=True)
    partial.rename(target)
    return Exported(target, gap)


EXPORT_MARKER = ".doctune-export"  # in DIR.partial while an export writes it: whose export it is


def _clear_leftover(partial: Path, search: SearchRecord) -> None:
    if not partial.exists():
        return
    try:
        owner = json.loads((partial / EXPORT_MARKER).read_text())["run_dir"]
    except (OSError, ValueError, KeyError):
        owner = None
    if owner != search.run_dir:
        whose = f"an export of another run ({owner})" if owner else "not left by a doctune export"
        raise ExportError(f"{partial} exists and is {whose}; remove it, or export to another directory")
    print(f"doctune: removing {partial}, left by an interrupted export of this run", flush=True)
    shutil.rmtree(partial)


def sentence_transformers_gap(pooling: str, model_type: str) -> str | None:
    """Why sentence-transformers would embed differently from doctune, or None if it embeds the same."""
    if model_type == "longformer":  # trainers.encoder.encode gives [CLS] global attention
        return (
            "sentence-transformers runs a Longformer without the global attention on [CLS] that doctune gives it, "
            "so it would embed texts that do not fit in the attention window differently from the scored embeddings"
        )
    if pooling not in POOLINGS:
        return f"doctune's {pooling!r} pooling has no sentence-transformers equivalent"
    return None


def _write_sentence_transformers_files(directory: Path, pooling: PoolingExport, config: dict, max_length: int) -> None:
    """Transformer -> Pooling -> Normalize, as sentence-transformers lays a model out on disk."""
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        # doctune's embeddings are L2-normalised (trainers.encoder.embed_texts)
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ]
    _write_json(directory / "modules.json", modules)
    # the tokenizer lowercases by itself where its model needs it
    _write_json(directory / "sentence_bert_config.json", {"max_seq_length": max_length, "do_lower_case": False})
    _write_json(
        directory / "config_sentence_transformers.json",
        {"prompts": {}, "default_prompt_name": None, "similarity_fn_name": "cosine"},
    )
    flags = {flag: flag == pooling.st_flag for flag in ST_POOLING_FLAGS}
    _write_json(
        directory / "1_Pooling" / "config.json",
        {"word_embedding_dimension": config["hidden_size"], **flags, "include_prompt": True},
    )
    # Normalize has no parameters; a file keeps the folder when the model is copied or uploaded
    _write_json(directory / "2_Normalize" / "config.json", {})


def _write_json(path: Path, value: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2) + "\n")


def _main_metric(task: str, scores: dict[str, float]) -> str:
    """The name of a task's main score: the task registry's, else the metric reported with the same value."""
    from evaluators.tasks import TASKS

    if task in TASKS:
        return TASKS[task].metadata.main_score
    return next((k for k, v in scores.items() if k != "main" and v == scores.get("main")), "main")


def _value(value: object) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def model_card(row: Row, record: dict, search: SearchRecord, model_type: str, path: Path, gap: str | None) -> str:
    """README.md of an exported encoder: what it is, how it scored, how to run its search again, how to use it."""
    pooling = record["pooling"]
    weights = {task: w for tasks in search.objectives.values() for task, w in tasks.items()}
    objective_lines = [
        f"{'Objective' if name == 'objective' else f'Objective `{name}`'} on the validation parts: "
        f"({' + '.join(f'{w:g} × {task}' for task, w in tasks.items())}) / {sum(tasks.values()):g} = "
        f"{row.objectives.get(name, row.objective):.4f}"
        for name, tasks in search.objectives.items()
    ]
    if row.test_objective is not None:
        objective_lines.append(f"The same on the test parts (the first objective): {row.test_objective:.4f}")
    objective_lines += [
        f"Test objective over `{against}`: {Gain.from_record(g).describe()}" for against, g in row.gains.items()
    ]
    if row.confirmation:
        stats = row.confirmation["test_objective"]
        spread = f" ± {stats['std']:.4f} (mean ± sample std)" if stats["std"] is not None else ""
        objective_lines.append(
            f"Over {stats['n']} training seeds this configuration's test objective is {stats['mean']:.4f}{spread}"
        )
    score_rows = []
    for task in row.scores:
        test, val = part(row.scores, task, "test"), part(row.scores, task, "val")
        if "main" in test:
            score_rows.append(
                f"| {task} | {_main_metric(task, test)} | {score_with_error(test)} | {_value(val.get('main', '–'))} "
                f"| {weights.get(task, 'report only')} |"
            )
    hp_rows = [
        f"| {name} | {_value(value)} | {'yes' if name in search.searched else ''} |"
        for name, value in sorted(record["hyperparameters"].items())
    ]
    lines = [
        f"# {search.name}: trial {row.trial}",
        "",
        f"A document encoder from a doctune search: `{search.base_model}` further pretrained with the "
        f"`{record['recipe']}` recipe on the `{search.corpus}` corpus. Trial `{row.trial}` of the search "
        f"`{search.name}` (spec `{search.spec}`, profile `{search.profile}`), checkpoint of step {record['step']}; "
        f"trial status: {row.status}.",
        "",
        f"Embeddings: {pooling} pooling of the last hidden states, L2-normalised; texts truncated to "
        f"{search.max_length} tokens, the length the scores below were measured at (tasks whose texts run "
        "longer, such as the probes, average the embeddings of consecutive windows instead: `python -m "
        "evaluators --list` shows each task's choice).",
        "",
        "## Scores",
        "",
        *(f"{line}." for line in objective_lines),
        "",
        "Each objective is the weighted mean of its tasks' main scores"
        + (" (several: the first ranks the leaderboard)." if len(search.objectives) > 1 else ".")
        + " The checkpoint was chosen on the tasks' validation parts; the test parts steered nothing. Gains over "
        "the baselines are paired bootstraps over the same test items (95% intervals).",
        "",
        "| task | main score | test (± standard error) | validation | weight in objective |",
        "|---|---|---|---|---|",
        *score_rows,
        "",
        "## Hyperparameters",
        "",
        f"Recipe `{record['recipe']}`, base model `{search.base_model}`, corpus `{search.corpus}`.",
        "",
        "| name | value | searched |",
        "|---|---|---|",
        *hp_rows,
        "",
        "## Reproduce",
        "",
        "From a doctune checkout, this runs the search again (in `runs/<spec name>`, or where `--run-dir` says):",
        "",
        "```bash",
        search.command,
        "```",
        "",
        "## Use",
        "",
        *_usage(pooling, model_type, path, search.max_length, gap),
    ]
    return "\n".join(lines) + "\n"


def _usage(pooling: str, model_type: str, path: Path, max_length: int, gap: str | None) -> list[str]:
    if gap is None:
        sentence_transformers = [
            "With sentence-transformers:",
            "",
            "```python",
            "from sentence_transformers import SentenceTransformer",
            "",
            f"model = SentenceTransformer({json.dumps(str(path))})",
            f"embeddings = model.encode({json.dumps(USAGE_TEXTS)})",
            "```",
        ]
    else:
        sentence_transformers = [f"No sentence-transformers files: {gap}. Use transformers as below."]
    global_attention = (  # [CLS] attends globally, as trainers.encoder.encode has it
        [
            'batch["global_attention_mask"] = torch.zeros_like(batch["input_ids"])',
            'batch["global_attention_mask"][:, 0] = 1',
        ]
        if model_type == "longformer"
        else []
    )
    if pooling in POOLINGS:
        pooled, imports = POOLINGS[pooling].torch_expression, []
    else:  # doctune's own pooling function
        pooled, imports = f'pool(hidden, mask[..., 0], "{pooling}")', ["from trainers.encoder import pool"]
    transformers = [
        "With transformers:",
        "",
        "```python",
        "import torch",
        "from transformers import AutoModel, AutoTokenizer",
        *imports,
        "",
        f"path, texts = {json.dumps(str(path))}, {json.dumps(USAGE_TEXTS)}",
        "tokenizer, model = AutoTokenizer.from_pretrained(path), AutoModel.from_pretrained(path).eval()",
        f'batch = tokenizer(texts, padding=True, truncation=True, max_length={max_length}, return_tensors="pt")',
        *global_attention,
        "with torch.no_grad():",
        '    hidden, mask = model(**batch).last_hidden_state, batch["attention_mask"].unsqueeze(-1)',
        f"embeddings = torch.nn.functional.normalize({pooled}, dim=-1)",
        "```",
    ]
    return [*sentence_transformers, "", *transformers]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m platform.export", description=__doc__.split("\n\n")[1])
    parser.add_argument("run_dir", type=Path, help="a finished search's run directory (runs/<spec name> by default)")
    parser.add_argument("--trial", help="trial id from the leaderboard; default: the best trial")
    parser.add_argument("--to", type=Path, required=True, help="directory to write (new, or empty)")
    return parser.parse_args(argv)


def check_inputs(run_dir: Path, trial: str | None, to: Path) -> tuple[Row, SearchRecord, Path, Path]:
    """(row, search, checkpoint, target) for an export, or ExportError saying what is wrong."""
    if not run_dir.is_dir():
        raise ExportError(
            f"run directory {run_dir} does not exist; name the directory a search wrote (runs/<spec name>)"
        )
    if not (run_dir / "search.json").exists():
        raise ExportError(f"{run_dir} holds no search.json: not a doctune run directory")
    try:
        search = SearchRecord.read(run_dir)
    except (KeyError, TypeError, ValueError) as err:
        raise ExportError(
            f"{run_dir}/search.json is not one this doctune wrote ({type(err).__name__}: {err})"
        ) from None
    if not (run_dir / "leaderboard.json").exists():
        raise ExportError(
            f"{run_dir} holds no leaderboard.json: its search has not finished; finish it with "
            f"{search.command} --run-dir {shlex.quote(str(run_dir))} --resume"
        )
    try:
        rows = [Row(**record) for record in json.loads((run_dir / "leaderboard.json").read_text())]
    except (TypeError, ValueError) as err:
        raise ExportError(f"{run_dir}/leaderboard.json is not one this doctune wrote ({err})") from None
    trials = [r.trial for r in rows if not is_baseline(r)]
    if trial is None:
        row = winner(rows)
        if row is None:
            raise ExportError(f"no trial in {run_dir}/leaderboard.json has a score; there is nothing to export")
    else:
        row = next((r for r in rows if r.trial == trial), None)
        if row is None:
            raise ExportError(f"no trial {trial!r} in {run_dir}/leaderboard.json; known: {', '.join(trials)}")
        if is_baseline(row):
            raise ExportError(
                f"{row.trial!r} is the untouched base model ({row.checkpoint}), not a trial; choose one of: "
                f"{', '.join(trials)}"
            )
        if row.checkpoint is None:
            raise ExportError(f"trial {trial!r} has no checkpoint ({row.status}); choose another: {', '.join(trials)}")
    checkpoint = _locate_checkpoint(row, run_dir)
    target = to.resolve()
    if target.is_file() or (target.is_dir() and any(target.iterdir())):
        raise ExportError(f"--to {to} exists and is not an empty directory; name a new directory, or empty that one")
    parent = next(p for p in [target, *target.parents] if p.exists())
    if not os.access(parent, os.W_OK):
        raise ExportError(f"--to {to}: {parent} is not writable; name a directory elsewhere")
    return row, search, checkpoint, target


def _locate_checkpoint(row: Row, run_dir: Path) -> Path:
    """The row's checkpoint, or the same checkpoint inside ``run_dir`` when the run directory was moved
    or copied (the leaderboard records absolute paths)."""
    recorded = Path(row.checkpoint)
    candidates = [recorded, run_dir / "trials" / row.trial / "checkpoints" / recorded.name]
    # a round whose weights train.keep_checkpoints released keeps only its record and scores
    found = next((c for c in candidates if (c / "doctune.json").is_file() and (c / "config.json").is_file()), None)
    if found is None:
        raise ExportError(
            f"trial {row.trial!r}: its checkpoint {recorded} no longer exists (nor in {candidates[1].parent}); "
            "export another trial with --trial, or restore the run directory's trials/"
        )
    return found


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        row, search, checkpoint, target = check_inputs(args.run_dir, args.trial, args.to)
        exported = export_trial(row, search, target, checkpoint)  # refuses a foreign DIR.partial first
    except ExportError as err:
        print(f"doctune: error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(f"doctune: trial {row.trial} (objective {row.objective:.4f}) exported to {exported.path}")
    if exported.sentence_transformers_gap:
        print(f"doctune: no sentence-transformers files: {exported.sentence_transformers_gap}")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
