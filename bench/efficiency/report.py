"""The comparison written out: JSON-safe values, a Markdown table and the curves as a figure."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np


def json_safe(value: Any) -> Any:
    """``value`` with every non-finite float as None (JSON has no -inf or NaN)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: json_safe(item) for key, item in value.items()}
    if isinstance(value, list):
        return [json_safe(item) for item in value]
    return value


def _iqr(summary: dict[str, float]) -> str:
    return f"{summary['median']:.4f} ({summary['p25']:.4f}-{summary['p75']:.4f})"


def markdown(result: dict) -> str:
    """The comparison as a Markdown table."""
    lines = [
        "| method | trials | median final steps | median best val (IQR) | median test of pick (IQR) "
        "| steps to reach random's final median | ratio vs random |",
        "|---|---:|---:|---|---|---:|---:|",
    ]
    for name, entry in result["methods"].items():
        reached, ratio = entry["steps_to_target"], entry["ratio_vs_random"]
        lines.append(
            f"| {name} | {entry['samples']} | {entry['final_steps']['median']:.0f} | {_iqr(entry['final_best_val'])} "
            f"| {_iqr(entry['final_test_of_pick'])} | {'never' if reached is None else reached} "
            f"| {'-' if ratio is None else f'{ratio:.2f}'} |"
        )
    if "diagnostics" in result:
        d = result["diagnostics"]
        lines += [
            "",
            f"Last round over {d['configurations']} configurations: validation objective range {d['val_range']:.4f} "
            f"(std {d['val_std']:.4f}); Spearman(validation, test) {d['spearman_val_test']:.2f}; test objective of "
            f"the best-validation configuration {d['test_of_best_val']:.4f}, best test {d['best_test']:.4f}, "
            f"median test {d['median_test']:.4f}.",
        ]
    return "\n".join(lines)


def plot(result: dict, path: Path) -> None:
    """Median and IQR band of each method's best validation objective and pick's test objective against
    the training steps consumed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    budgets = np.array(result["budgets"])
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8))
    for name, entry in result["methods"].items():
        for ax, key in zip(axes, ("best_val", "test_of_pick"), strict=True):
            curve = {q: np.array(v, dtype=float) for q, v in entry["curve"][key].items()}
            curve = {q: np.where(np.isfinite(v), v, np.nan) for q, v in curve.items()}
            (line,) = ax.plot(
                budgets, curve["median"], drawstyle="steps-post", label=f"{name} ({entry['samples']} trials)"
            )
            ax.fill_between(
                budgets, curve["p25"], curve["p75"], step="post", color=line.get_color(), alpha=0.18, linewidth=0
            )
    if result["random_target"] is not None:
        axes[0].axhline(
            result["random_target"]["best_val"], color="grey", linestyle="--", label="random search's final median"
        )
    axes[0].set_ylabel("best validation objective so far")
    axes[1].set_ylabel("test objective of the picked checkpoint")
    for ax in axes:
        ax.set_xlabel("training steps consumed")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    seeds = max(entry["seeds"] for entry in result["methods"].values())
    fig.suptitle(f"{result['table']}: search efficiency, median and IQR over {seeds} seeds")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
