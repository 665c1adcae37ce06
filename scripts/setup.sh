#!/usr/bin/env bash
# Create .venv (once) and install doctune's dependencies into it. Sourced by search.sh and test.sh.
#
# torch: where no NVIDIA GPU is present, the CPU-only build comes from PyTorch's CPU wheel index
# (a plain `pip install torch` on Linux pulls the CUDA build and gigabytes of CUDA libraries).
# When that index cannot be reached within a few seconds (a machine that reaches only a mirror of
# the standard registries), torch comes from the configured index instead, and the script says so.
# On GPU machines pyproject's torch range takes a CUDA build from the configured index.
#
# Environment: PYTHON (the interpreter for the venv, default python3); DOCTUNE_TORCH_CPU_INDEX
# (the CPU wheel index); DOCTUNE_SETUP_PLAN=1 prints the install commands instead of running them.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
stamp="$venv/.doctune-installed"
python="${PYTHON:-python3}"
torch_pin="torch==2.13.0"
cpu_index="${DOCTUNE_TORCH_CPU_INDEX:-https://download.pytorch.org/whl/cpu}"
plan_only="${DOCTUNE_SETUP_PLAN:-0}"

run() {
  if [ "$plan_only" = 1 ]; then printf '%s\n' "$*"; else "$@"; fi
}

# Whether the index answers within 5 s; an unknown host or a closed port fails at once.
index_reachable() {
  "$python" - "$1" <<'EOF'
import sys
import urllib.request

try:
    urllib.request.urlopen(sys.argv[1].rstrip("/") + "/torch/", timeout=5)
except Exception:
    sys.exit(1)
EOF
}

install_cpu_torch() {
  local pip=("$venv/bin/python" -m pip install --quiet)
  if index_reachable "$cpu_index"; then
    echo "setup.sh: no NVIDIA GPU; installing torch's CPU build from $cpu_index" >&2
    run "${pip[@]}" "$torch_pin" --index-url "$cpu_index" && return
    echo "setup.sh: the CPU wheel index did not serve $torch_pin; trying the configured index" >&2
  else
    echo "setup.sh: no NVIDIA GPU, and $cpu_index cannot be reached; installing $torch_pin from the" \
      "configured index (the CPU build only if that index serves it)" >&2
  fi
  run "${pip[@]}" "$torch_pin"
}

if [ "$plan_only" = 1 ] || [ ! -f "$stamp" ] || [ "$root/pyproject.toml" -nt "$stamp" ]; then
  [ -x "$venv/bin/python" ] || run "$python" -m venv "$venv"
  run "$venv/bin/python" -m pip install --quiet --upgrade pip
  command -v nvidia-smi >/dev/null 2>&1 || install_cpu_torch
  run "$venv/bin/python" -m pip install --quiet -e "$root[test]"
  [ "$plan_only" = 1 ] || touch "$stamp"
fi
