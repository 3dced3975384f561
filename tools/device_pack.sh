#!/usr/bin/env bash
# Builds Aerie with CUDA here (sm_90) and gathers what the GPU machine needs to run it into
# .device/ (git-ignored): binaries in .device/bin, the shared libraries it lacks in
# .device/lib. Then: device run with carry [".device"] and `tools/gpu_check.sh`.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/cuda/bin:$PATH
cmake -S . -B build-cuda -G Ninja -DCMAKE_BUILD_TYPE=Release -DAERIE_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null
cmake --build build-cuda -j"$(nproc)"
rm -rf .device && mkdir -p .device/bin
bins="build-cuda/launch/aerie-generate build-cuda/launch/aerie-serve build-cuda/launch/aerie-bench build-cuda/tests/aerie-dump-logits \
      build-cuda/tests/gpu_test"
cp $bins .device/bin/
strip .device/bin/* || true
BUNDLE=${DEVICE_BUNDLE:-../shared/tools/device-bundle}
bash "$BUNDLE" runtime .device .device/bin/*
du -sh .device
