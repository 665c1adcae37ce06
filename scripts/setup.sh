#!/usr/bin/env bash
# Create .venv (once) and install doctune's dependencies into it. Sourced by search.sh and test.sh.
#
# Every package comes from a lock (locks/, written by scripts/lock.sh), pinned with its hashes:
# locks/cuda.txt where `nvidia-smi` is present (PyPI's torch and its CUDA libraries), else
# locks/cpu.txt (torch's CPU build, from PyTorch's CPU wheel index: a plain `pip install torch` on
# Linux pulls the CUDA build and gigabytes of CUDA libraries). When that index cannot be reached
# within a few seconds (a machine that reaches only a mirror of the standard registries), the CPU
# wheel comes from the configured index or find-links instead, and the script says so. The locks are
# for CPython 3.11; doctune itself is installed editable, with no dependency of its own.
#
# Environment: PYTHON (the interpreter for the venv, default python3); DOCTUNE_TORCH_CPU_INDEX
# (the CPU wheel index); DOCTUNE_SETUP_PLAN=1 prints the install commands instead of running them.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
stamp="$venv/.doctune-installed"
python="${PYTHON:-python3}"
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

lock_install() {  # lock_install LOCK [PIP ARGS...]: exactly the lock's packages, each checked against its hashes
  local lock="$1"
  shift
  run "$venv/bin/python" -m pip install --quiet --require-hashes --no-deps -r "$root/locks/$lock.txt" "$@"
}

if [ "$plan_only" = 1 ] || [ ! -f "$stamp" ] || [ "$root/pyproject.toml" -nt "$stamp" ] ||
  [ -n "$(find "$root/locks" -newer "$stamp" -name '*.txt' 2>/dev/null)" ]; then
  version="$("$python" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
  if [ "$version" != 3.11 ]; then
    echo "setup.sh: error: $python is Python $version; the locks in locks/ are for Python 3.11:" \
      "set PYTHON to a Python 3.11 interpreter (PYTHON=python3.11 $0)" >&2
    exit 2
  fi
  [ -x "$venv/bin/python" ] || run "$python" -m venv "$venv"
  if command -v nvidia-smi >/dev/null 2>&1; then
    echo "setup.sh: NVIDIA GPU found; installing locks/cuda.txt (torch with its CUDA libraries)" >&2
    lock_install cuda
  elif index_reachable "$cpu_index"; then
    echo "setup.sh: no NVIDIA GPU; installing locks/cpu.txt, torch's CPU build from $cpu_index" >&2
    lock_install cpu --extra-index-url "$cpu_index"
  else
    echo "setup.sh: no NVIDIA GPU, and $cpu_index cannot be reached; installing locks/cpu.txt with torch's" \
      "CPU build from the configured index" >&2
    lock_install cpu
  fi
  # the project itself, editable; its build backend (setuptools) is in the lock
  run "$venv/bin/python" -m pip install --quiet --no-deps --no-build-isolation -e "$root"
  [ "$plan_only" = 1 ] || touch "$stamp"
fi
