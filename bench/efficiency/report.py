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


def _spread(figure: dict[str, float | None], digits: int, signed: bool = False) -> str:
    """``p50 (p10 to p90)``; "never" for a figure never reached (inf, or None once written as JSON)."""

    def shown(value: float | None) -> str:
        if value is None or math.isinf(value):
            return "never"
        return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"

    return f"{shown(figure['p50'])} ({shown(figure['p10'])} to {shown(figure['p90'])})"


def _rho(entry: dict) -> str:
    if entry["rho"] is None:
        return f"- ({entry['configurations']})"
    return f"{entry['rho']:+.2f} ({entry['p05']:+.2f} to {entry['p95']:+.2f}; {entry['configurations']})"


def end_points_table(result: dict) -> list[str]:
    """The first batch's end points: each method's trials, median final steps, median best
    validation objective and median test objective of its pick (each with its IQR)."""
    lines = [
        "| method | trials | median final steps | median best val (IQR) | median test of pick (IQR) |",
        "|---|---:|---:|---|---|",
    ]
    for name, entry in result["methods"].items():
        lines.append(
            f"| {name} | {entry['samples']} | {entry['final_steps']['median']:.0f} | {_iqr(entry['final_best_val'])} "
            f"| {_iqr(entry['final_test_of_pick'])} |"
        )
    return lines


def spread_table(result: dict) -> list[str]:
    """Across batches, p50 (p10 to p90): each method's steps and compute to random search's final
    median, over random's budget and over random's own figure, and its pick's test objective against
    random's at equal compute."""
    lines = [
        "| method | steps to random's final median | / random's budget | / random's own | compute to it, "
        "start-up charged | / random's budget | / random's own | test of pick - random's, equal compute |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, entry in result["intervals"]["methods"].items():
        lines.append(
            f"| {name} | {_spread(entry['steps_to_target'], 0)} "
            f"| {_spread(entry['steps_to_target_vs_random_budget'], 2)} "
            f"| {_spread(entry['steps_to_target_vs_random'], 2)} | {_spread(entry['compute_to_target'], 1)} "
            f"| {_spread(entry['compute_to_target_vs_random_budget'], 2)} "
            f"| {_spread(entry['compute_to_target_vs_random'], 2)} "
            f"| {_spread(entry['test_vs_random'], 4, signed=True)} |"
        )
    return lines


def compute_table(result: dict) -> list[str]:
    """The spread table's compute columns alone, for a narrow page: each method's compute to random
    search's final median (start-up charged) over random's budget and over random's own, and its
    pick's test objective against random's at equal compute."""
    lines = ["| method | compute / random's budget | / random's own | test - random's |", "|---|---|---|---|"]
    for name, entry in result["intervals"]["methods"].items():
        lines.append(
            f"| {name} | {_spread(entry['compute_to_target_vs_random_budget'], 2)} "
            f"| {_spread(entry['compute_to_target_vs_random'], 2)} "
            f"| {_spread(entry['test_vs_random'], 3, signed=True)} |"
        )
    return lines


def spearman_table(result: dict) -> list[str]:
    """Spearman(validation, test) over the table's configurations, at their last round and at their
    best validation round: all finite, the sensible ones, the sensible top half by validation."""
    rho = result["diagnostics"]["spearman"]
    return [
        "| configurations at | all finite | sensible | sensible, top half by validation |",
        "|---|---|---|---|",
        *(
            f"| {label} | {_rho(rho[key]['all'])} | {_rho(rho[key]['sensible'])} "
            f"| {_rho(rho[key]['sensible_top_half'])} |"
            for key, label in (("last_round", "the last round"), ("best_round", "their best validation round"))
        ),
    ]


def markdown(result: dict) -> str:
    """The comparison as Markdown tables: the first batch's end points, the figures' spread across
    batches, and the diagnostics."""
    lines = end_points_table(result)
    if "intervals" in result:
        spread, charge = result["intervals"], result["startup"]
        lines += [
            "",
            (
                f"Across {spread['batches']} batches of {spread['seeds_per_batch']} seeds, p50 (p10 to p90); "
                if spread["batches"] > 1
                else f"One batch of {spread['seeds_per_batch']} seeds (no spread measured: --batches); "
            )
            + "/ random's own: over random search's figure in the same batch; start-up "
            + (
                f"charged at {charge['steps_per_trial']:.2f} step-equivalents a trial "
                f"({charge['seconds_per_trial']} s of {charge['seconds_per_configuration']:.1f} s a configuration):"
                if charge["charged"]
                else "not charged (the table records no wall time):"
            ),
            "",
            *spread_table(result),
        ]
    if "diagnostics" in result:
        d = result["diagnostics"]
        lines += [
            "",
            f"Last round over {d['configurations']} configurations: validation objective range {d['val_range']:.4f} "
            f"(std {d['val_std']:.4f}); test objective of the best-validation configuration "
            f"{d['test_of_best_val']:.4f}, best test {d['best_test']:.4f}, median test {d['median_test']:.4f}"
            + (
                f"; the objective's standard error at the table's parts {d['objective_se']:.4f}, "
                f"{d['se_over_spread']:.2f} of that std"
                + (
                    " ({:.2f} to {:.2f} over resampled configurations). ".format(*d["se_over_spread_interval"])
                    if d.get("se_over_spread_interval")
                    else ". "
                )
                if d.get("objective_se") is not None
                else ". "
            )
            + f"Spearman(validation, test), 90% bootstrap interval and configurations; sensible: {d['sensible']}:",
            "",
            *spearman_table(result),
        ]
    return "\n".join(lines)


def plot(result: dict, path: Path) -> None:
    """Median and IQR band over the first batch's seeds of each method's best validation objective and
    pick's test objective against the training steps consumed; with several batches, beside them each
    method's compute to random search's final median (start-up charged) in every batch."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    spread = result.get("intervals")
    several = spread is not None and spread["batches"] > 1
    budgets = np.array(result["budgets"])
    fig, axes = plt.subplots(1, 3 if several else 2, figsize=(19 if several else 13, 4.8))
    for name, entry in result["methods"].items():
        for ax, key in zip(axes, ("best_val", "test_of_pick")):
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
    for ax in axes[:2]:
        ax.set_xlabel("training steps consumed")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    seeds = max(entry["seeds"] for entry in result["methods"].values())
    title = f"{result['table']}: median and IQR over the first {seeds} seeds"
    if several:
        names = list(spread["methods"])
        # a batch that never reaches the target is left out of its box and counted in the label
        reached = [
            [v for v in spread["methods"][n]["per_batch"]["compute_to_target"] if v is not None and math.isfinite(v)]
            for n in names
        ]
        labels = [
            f"{n}\n({spread['batches'] - len(r)} never)" if len(r) < spread["batches"] else n
            for n, r in zip(names, reached)
        ]
        axes[2].boxplot(reached, whis=(10, 90), showfliers=True)
        axes[2].set_xticks(range(1, len(names) + 1), labels, fontsize=8, rotation=20)
        axes[2].set_ylabel("compute to random's final median\n(step-equivalents, start-up charged)")
        axes[2].grid(alpha=0.3, axis="y")
        title += f"; right: each of {spread['batches']} batches of {spread['seeds_per_batch']} seeds (whiskers p10-p90)"
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
