#!/usr/bin/env bash
# Create .venv (once) and install doctune's dependencies into it. Sourced by search.sh and test.sh.
# Where no NVIDIA GPU is present, torch is pinned to the CPU build first (a plain install would
# pull a multi-GB CUDA build); on GPU machines pyproject's torch range takes a CUDA build.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
stamp="$venv/.doctune-installed"
python="${PYTHON:-python3}"
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
fi
if [ ! -f "$stamp" ] || [ "$root/pyproject.toml" -nt "$stamp" ]; then
  "$venv/bin/python" -m pip install --quiet --upgrade pip
  if ! command -v nvidia-smi >/dev/null 2>&1; then
    "$venv/bin/python" -m pip install --quiet "torch==2.13.0"
  fi
  "$venv/bin/python" -m pip install --quiet -e "$root[test]"
  touch "$stamp"
fi
