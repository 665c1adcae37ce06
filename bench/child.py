"""Running one benchmark configuration in a fresh process, so memory readings and warm caches do
not leak between measurements. A script calls ``run_child(__file__, config)``; the child is the
same script started with ``--child <config as JSON>`` and prints its result as the last line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_child(script: str, config: dict) -> dict:
    done = subprocess.run(
        [sys.executable, script, "--child", json.dumps(config)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


NO_GPU = "no GPU"  # what ``gpus`` says of a machine without one


def gpus() -> str:
    """The GPUs this machine has, as detected (not assumed): ``NO_GPU``, or their count and name."""
    import torch

    if not torch.cuda.is_available():
        return NO_GPU
    return f"{torch.cuda.device_count()} x {torch.cuda.get_device_name(0)}"


def cpu_name() -> str:
    """The CPU's model name, as /proc/cpuinfo gives it (the architecture where it cannot be read)."""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return os.uname().machine
