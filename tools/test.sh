#!/usr/bin/env bash
# Installs the test-only Python packages (CPU torch + transformers, the reference) and runs
# the whole test suite of an existing build (tools/setup.sh makes it). Tests labelled gpu
# skip cleanly on machines without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
[[ -d "$BUILD_DIR" ]] || { echo "no build in $BUILD_DIR: run tools/setup.sh first" >&2; exit 2; }
if [[ -z "${AERIE_SKIP_PIP:-}" ]]; then
  # --break-system-packages: Debian's own python3 refuses pip installs otherwise (PEP 668);
  # harmless in a virtual environment or a pyenv interpreter.
  python3 -m pip install -q --disable-pip-version-check --break-system-packages -r tests/requirements.txt
  # sglang's bench_serving client only: the package's own dependencies are its GPU server
  # (a different torch among them), which the client does not import.
  python3 -m pip install -q --disable-pip-version-check --break-system-packages --no-deps sglang==0.5.4
fi
ctest --test-dir "$BUILD_DIR" --output-on-failure -j"$(nproc)" "$@"
