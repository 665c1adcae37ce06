#!/usr/bin/env bash
# Resolve the locked environments in locks/ from pyproject.toml: every package pinned with its
# hashes, for CPython 3.11 on Linux x86_64 (manylinux_2_28). scripts/setup.sh, CI, the Dockerfile and
# the cluster files install from these files only. Run after changing a requirement; versions already
# in a lock stay unless the change needs another (arguments go to `uv pip compile`: `--upgrade` takes
# the newest versions the requirements allow).
#
#   locks/cpu.txt    the runtime and the test extra, torch's CPU build   (setup.sh without a GPU, CI)
#   locks/cuda.txt   the runtime and the test extra, PyPI's CUDA torch   (setup.sh with a GPU)
#   locks/node.txt   the runtime, the trackers and boto3, PyPI's CUDA torch (cluster nodes, the image)
#
# DOCTUNE_LOCKS names the locks to write (default "cpu cuda node"). Needs uv (`pip install uv`; UV
# names another binary). torch's CPU build is not on PyPI: its wheel is fetched from
# DOCTUNE_TORCH_CPU_INDEX (default https://download.pytorch.org/whl/cpu), or taken from the directory
# DOCTUNE_TORCH_WHEELS when that holds it, and hashed from the file.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
torch_version="2.13.0"
cpu_index="${DOCTUNE_TORCH_CPU_INDEX:-https://download.pytorch.org/whl/cpu}"
uv="${UV:-uv}"
cd "$root"

locks="${DOCTUNE_LOCKS:-cpu cuda node}"
wheels="${DOCTUNE_TORCH_WHEELS:-}"
if [ -z "$wheels" ] && [[ " $locks " == *" cpu "* ]]; then
  wheels="$(mktemp -d)"
  trap 'rm -rf "$wheels"' EXIT
  python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.11 \
    --platform manylinux_2_28_x86_64 --index-url "$cpu_index" -d "$wheels" "torch==$torch_version+cpu"
fi

# pyproject's build backend, locked too: doctune itself installs with --no-build-isolation
build_backend="setuptools>=77"

compile() {  # compile OUTPUT EXTRAS TORCH [ARGS...]
  local output="$1" extras="$2" torch="$3"
  shift 3
  local extra_args=()
  for extra in $extras; do extra_args+=(--extra "$extra"); done
  "$uv" pip compile pyproject.toml <(printf '%s\n' "$build_backend") "${extra_args[@]}" --no-config --generate-hashes \
    --python-version 3.11 --python-platform x86_64-manylinux_2_28 \
    --index-url https://pypi.org/simple --custom-compile-command "scripts/lock.sh" --no-annotate \
    --constraints <(printf 'torch==%s\n' "$torch") --output-file "$output" --quiet "$@"
}

mkdir -p locks
for lock in $locks; do
  case "$lock" in
    cpu) compile locks/cpu.txt "test" "$torch_version+cpu" --find-links "$wheels" "$@" ;;
    cuda) compile locks/cuda.txt "test" "$torch_version" "$@" ;;
    node) compile locks/node.txt "cluster mlflow wandb" "$torch_version" "$@" ;;
    *) echo "lock.sh: no lock named '$lock' (cpu, cuda or node)" >&2 && exit 2 ;;
  esac
done
