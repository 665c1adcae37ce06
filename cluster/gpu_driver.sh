#!/usr/bin/env bash
# The NVIDIA driver doctune's CUDA build of torch needs (locks/cuda.txt and the image: torch 2.13.0
# for CUDA 13.0, which needs a Linux driver of 580 or later), checked on a GPU node before it offers
# its GPUs to Ray: with an older driver (535, 550 and 570 are common on shared clusters) Ray would
# still advertise the GPUs and every trial would then fail with no usable CUDA, naming nothing.
#
#   bash cluster/gpu_driver.sh   # one line and exit 0, or one message naming the driver found and
#                                # the one needed, and exit 1
#
# Run first on every GPU node of each route: cluster.yaml's workers (worker_start_ray_commands), each
# node of cluster/slurm.sbatch, the init container of cluster/kuberay.yaml's GPU group. Sourced by
# scripts/setup.sh, it defines CUDA_DRIVER_MIN, driver_version and driver_problem.
CUDA_DRIVER_MIN=580

# The NVIDIA driver's version (e.g. 580.95.05), empty where nvidia-smi answers none.
driver_version() {
  local answer
  answer="$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null)" || true
  answer="${answer%%$'\n'*}" # the first GPU's
  printf '%s\n' "${answer// /}"
}

# What keeps this node's driver from running doctune's torch, in words; nothing where it can.
driver_problem() {
  if ! command -v nvidia-smi >/dev/null 2>&1; then
    echo "no NVIDIA driver answers (nvidia-smi not found)"
    return
  fi
  local driver major
  driver="$(driver_version)"
  major="${driver%%.*}"
  case "$major" in "" | *[!0-9]*) major=0 ;; esac
  if [ "$major" -lt "$CUDA_DRIVER_MIN" ]; then
    echo "NVIDIA driver '${driver:-none}'"
  fi
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  problem="$(driver_problem)"
  if [ -n "$problem" ]; then
    echo "doctune: ${HOSTNAME:-this node}: $problem; doctune's torch (CUDA 13.0) needs NVIDIA driver" \
      "$CUDA_DRIVER_MIN or later: update the node's driver (its machine image, node pool image or driver" \
      "module) before it offers its GPUs" >&2
    exit 1
  fi
  echo "doctune: ${HOSTNAME:-this node}: NVIDIA driver $(driver_version) (CUDA 13.0 needs $CUDA_DRIVER_MIN or later)"
fi
