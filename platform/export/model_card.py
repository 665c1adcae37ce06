"""The model card (``README.md``) of an exported encoder: what it is, how it scored, how to run
its search again, and how to use it (snippets the tests run)."""

from __future__ import annotations

import json
from pathlib import Path

from doctune_core.position_interpolation import CONFIG_KEY
from evaluators.leaderboard import LeaderboardRow
from evaluators.scores import coverage, part
from platform.export.record import SearchRecord
from platform.export.st_files import POOLINGS, needs_remote_code
from platform.results.text import describe_confirmation, score_with_error

# The texts the model card's usage snippets embed (the tests run the snippets on them).
USAGE_TEXTS = ["A first document.", "A second, longer document about something else."]


def _main_metric(task: str, scores: dict[str, float]) -> str:
    """The name of a task's main score: the task registry's, else the metric reported with the same value."""
    from evaluators.tasks import TASKS

    if task in TASKS:
        return TASKS[task].metadata.main_score
    return next((k for k, v in scores.items() if k != "main" and v == scores.get("main")), "main")


def _value(value: object) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def model_card(
    row: LeaderboardRow, record: dict, search: SearchRecord, config: dict, path: Path, gap: str | None
) -> str:
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
    if row.locked_reading:
        objective_lines.append(f"The test verdicts below: {row.locked_reading.describe()}.")
    objective_lines += [f"Test objective over `{against}`: {g.describe()}" for against, g in row.gains.items()]
    objective_lines += [
        f"The long-document tasks pooled over `{against}`: {g.describe()}" for against, g in row.long_task_gains.items()
    ]
    if row.confirmation:
        objective_lines.append(f"This configuration {describe_confirmation(row.confirmation)}")
    score_rows = []
    for task in row.scores:
        test, val = part(row.scores, task, "test"), part(row.scores, task, "val")
        if "main" in test:
            score_rows.append(
                f"| {task} | {_main_metric(task, test)} | {score_with_error(test)} | {_value(val.get('main', '–'))} "
                f"| {weights.get(task, 'report only')} | {coverage(test) or '–'} |"
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
        "the baselines are paired 95% intervals over the same test items (docs/decisions/gain-intervals.md).",
        "",
        "| task | main score | test (± standard error) | validation | weight in objective | test part scored |",
        "|---|---|---|---|---|---|",
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
        *_usage(pooling, config, path, search.max_length, gap),
    ]
    return "\n".join(lines) + "\n"


def _usage(pooling: str, config: dict, path: Path, max_length: int, gap: str | None) -> list[str]:
    model_type = config.get("model_type", "")
    remote_code = needs_remote_code(model_type)
    remote = ", trust_remote_code=True" if remote_code else ""
    if gap is None:
        sentence_transformers = [
            "With sentence-transformers:",
            "",
            "```python",
            "from sentence_transformers import SentenceTransformer",
            "",
            *(
                ["# a Longformer: modeling_doctune.py, beside the model, gives [CLS] global attention as doctune does"]
                if remote_code
                else []
            ),
            f"model = SentenceTransformer({json.dumps(str(path))}{remote})",
            f"embeddings = model.encode({json.dumps(USAGE_TEXTS)})",
            "```",
        ]
    else:
        sentence_transformers = [f"No sentence-transformers files: {gap}. Use transformers as below."]
    global_attention = (  # [CLS] attends globally, as doctune_core.encoder.encode has it
        [
            'batch["global_attention_mask"] = torch.zeros_like(batch["input_ids"])',
            'batch["global_attention_mask"][:, 0] = 1',
        ]
        if model_type == "longformer"
        else []
    )
    if config.get(CONFIG_KEY):  # interpolated positions, read as doctune_core.encoder.position_inputs reads them
        global_attention += [
            "import sys",
            "sys.path.insert(0, path)  # position_interpolation.py, beside the model",
            "from position_interpolation import position_ids",
            "offset = model.config.pad_token_id + 1",
            'batch["position_ids"] = position_ids(batch["attention_mask"], model.config.position_interpolation,',
            "                                     offset, model.config.max_position_embeddings - offset)",
        ]
    if pooling in POOLINGS:
        pooled, imports = POOLINGS[pooling].torch_expression, []
    else:  # doctune's own pooling function
        pooled, imports = f'pool(hidden, mask[..., 0], "{pooling}")', ["from doctune_core.encoder import pool"]
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
