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
# locks/cuda.txt's torch is built for CUDA 13.0, which needs an NVIDIA driver of 580 or later: where
# `nvidia-smi` reports an older driver (or none), the script stops and says so rather than install a
# torch that cannot see the GPU.
#
# Environment: PYTHON (the interpreter for the venv, default python3); DOCTUNE_LOCK=cpu or cuda (that
# lock, whatever this machine has: cpu on a GPU machine whose driver is too old, cuda on a login node
# or an image build without a GPU for GPU nodes); DOCTUNE_TORCH_CPU_INDEX (the CPU wheel index);
# DOCTUNE_SETUP_PLAN=1 prints the install commands instead of running them.
#
# .venv holds one lock's packages, named in its stamp (.venv/.doctune-installed). Later runs keep that
# lock (a choice made with DOCTUNE_LOCK stays made); a DOCTUNE_LOCK naming the other lock makes .venv
# anew with it, so no CUDA library is left beside a CPU torch, nor the reverse.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
stamp="$venv/.doctune-installed"
python="${PYTHON:-python3}"
cpu_index="${DOCTUNE_TORCH_CPU_INDEX:-https://download.pytorch.org/whl/cpu}"
plan_only="${DOCTUNE_SETUP_PLAN:-0}"
lock="${DOCTUNE_LOCK:-}"
# CUDA_DRIVER_MIN, driver_version, driver_problem: the GPU nodes' driver check, shared with every route
. "$root/cluster/gpu_driver.sh"

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

case "$lock" in
  cpu | cuda) why="DOCTUNE_LOCK=$lock" ;;
  "") ;;
  *)
    echo "setup.sh: error: DOCTUNE_LOCK=$lock; set it to cpu or cuda (or unset it to choose by the machine)" >&2
    exit 2
    ;;
esac

installed=""
[ ! -f "$stamp" ] || installed="$(cat "$stamp")"
if [ ! -f "$stamp" ] || [ "$root/pyproject.toml" -nt "$stamp" ] ||
  [ -n "$(find "$root/locks" -newer "$stamp" -name '*.txt' 2>/dev/null)" ] ||
  { [ -n "$lock" ] && [ "$lock" != "$installed" ]; }; then
  version="$("$python" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
  if [ "$version" != 3.11 ]; then
    echo "setup.sh: error: $python is Python $version; the locks in locks/ are for Python 3.11:" \
      "set PYTHON to a Python 3.11 interpreter (PYTHON=python3.11 $0)" >&2
    exit 2
  fi
  case "$installed" in
    cpu | cuda) [ -n "$lock" ] || lock="$installed" why="the lock .venv was made with" ;;
  esac
  if [ -z "$lock" ] && command -v nvidia-smi >/dev/null 2>&1; then
    problem="$(driver_problem)"
    if [ -n "$problem" ]; then
      echo "setup.sh: error: nvidia-smi reports $problem; locks/cuda.txt's torch (CUDA 13.0)" \
        "needs $CUDA_DRIVER_MIN or later: update the driver, or set DOCTUNE_LOCK=cpu for torch's CPU build" >&2
      exit 2
    fi
    lock=cuda why="NVIDIA driver $(driver_version) found"
  fi
  [ -n "$lock" ] || lock=cpu why="no NVIDIA GPU"
  if [ -n "$installed" ] && [ "$lock" != "$installed" ]; then
    echo "setup.sh: .venv holds locks/$installed.txt; making it anew for locks/$lock.txt" >&2
    run rm -rf "$venv"
    run "$python" -m venv "$venv"
  elif [ ! -x "$venv/bin/python" ]; then
    run "$python" -m venv "$venv"
  fi
  if [ "$lock" = cuda ]; then
    echo "setup.sh: $why; installing locks/cuda.txt (torch with its CUDA libraries)" >&2
    lock_install cuda
  elif index_reachable "$cpu_index"; then
    echo "setup.sh: $why; installing locks/cpu.txt, torch's CPU build from $cpu_index" >&2
    lock_install cpu --extra-index-url "$cpu_index"
  else
    echo "setup.sh: $why, and $cpu_index cannot be reached; installing locks/cpu.txt with torch's" \
      "CPU build from the configured index" >&2
    lock_install cpu
  fi
  # the project itself, editable; its build backend (setuptools) is in the lock
  run "$venv/bin/python" -m pip install --quiet --no-deps --no-build-isolation -e "$root"
  [ "$plan_only" = 1 ] || printf '%s\n' "$lock" >"$stamp"
fi
