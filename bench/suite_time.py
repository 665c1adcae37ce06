"""Wall time of the README's test command, ``./scripts/test.sh``, as CI runs it (``.ci/run``).

    .venv/bin/python bench/suite_time.py [--out bench/results/suite_time.json]

Runs ``scripts/test.sh`` in this checkout (run nothing else beside it: the suite's own lanes share
the machine's CPUs) and records the whole command's wall time, its exit status, the commit (with
``-dirty`` where files differ from it), the machine and each pytest session's summary in the order
the command prints them: the Ray lane, then beside it the tests that start no Ray and those with a
Ray of their own, then the cluster step. Writes ``--out`` and prints it as a Markdown table
(``steps_table``). CI's budget for the command is 40 minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))

from bench.markdown import table  # noqa: E402

STEPS = (
    "the Ray lane",
    "beside it: the tests that start no Ray",
    "then those with a Ray of their own",
    "the cluster step",
)
SUMMARY = re.compile(r"^=+ (.+) in ([\d.]+)s(?: \([\d:]+\))? =+$")


def steps_table(record: dict) -> list[str]:
    """Each pytest session the command ran, its tests and seconds; then the whole command's."""
    rows = [[step["step"], step["tests"], f"{step['seconds']:,.0f}"] for step in record["steps"]]
    status = "passed" if record["exit_status"] == 0 else f"failed (exit {record['exit_status']})"
    rows.append(["the whole command", status, f"**{record['wall_seconds']:,.0f}**"])
    return table(["step", "tests", "seconds"], rows, numeric=(2,))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "suite_time.json")
    args = parser.parse_args()
    from doctune_core.provenance import git_commit
    from platform.cluster.environment import cpu_model

    began = time.perf_counter()
    done = subprocess.run(["bash", str(ROOT / "scripts" / "test.sh")], cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - began
    summaries = [m for line in done.stdout.splitlines() if (m := SUMMARY.match(line.strip()))]
    record = {
        "command": "./scripts/test.sh",
        "commit": git_commit(ROOT),
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "machine": f"{os.cpu_count()} CPUs ({cpu_model()})",
        "wall_seconds": wall,
        "exit_status": done.returncode,
        "steps": [
            {"step": step, "tests": m.group(1), "seconds": float(m.group(2))} for step, m in zip(STEPS, summaries)
        ],
    }
    args.out.write_text(json.dumps(record, indent=1))
    log = ROOT / "bench" / "out" / "suite_time.log"  # the command's output, for a failure's cause (git ignores it)
    log.parent.mkdir(exist_ok=True)
    log.write_text(done.stdout + done.stderr)
    print("\n".join(steps_table(record)))
    return 0 if done.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
