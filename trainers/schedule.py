"""The learning-rate schedule both training loops (a trial's and the base stage's) follow."""

from __future__ import annotations


def lr_factor(step: int, total: int, warmup_ratio: float) -> float:
    """Linear warm-up, then linear decay to zero."""
    warmup = max(1, int(total * warmup_ratio))
    if step < warmup:
        return (step + 1) / warmup
    return max(0.0, (total - step) / max(1, total - warmup))
