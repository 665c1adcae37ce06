"""Loss arithmetic in at least float32: bf16/fp16 activations are promoted, float64 kept (the
finite-difference gradient checks run in float64)."""

from __future__ import annotations

import torch


def at_least_fp32(x: torch.Tensor) -> torch.Tensor:
    return x.to(torch.promote_types(x.dtype, torch.float32))
