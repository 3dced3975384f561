#!/usr/bin/env bash
# Builds Aerie with CUDA here (sm_90) and gathers what the GPU machine needs to run it into
# .device/ (git-ignored): binaries in .device/bin, the shared libraries it lacks in
# .device/lib, and all of it compressed into .device.tgz (git-ignored; the binaries carry
# every kernel, so uncompressed they pass the device tool's 64 MiB). Then: device run with
# carry [".device.tgz"] and a tools/gpu_*.sh script (which unpacks it).
# BUILD_DIR (default build-cuda) may name an existing CUDA build, e.g. tools/setup.sh's;
# BINS the binaries to take (paths under the build folder; default: all the gpu scripts use).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/cuda/bin:$PATH
BD=${BUILD_DIR:-build-cuda}
cmake -S . -B "$BD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DAERIE_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null
cmake --build "$BD" -j"$(nproc)"
rm -rf .device && mkdir -p .device/bin
# BINS may name fewer binaries (each holds every kernel) so a run keeps room for other files.
BINS=${BINS:-"launch/aerie-generate launch/aerie-serve launch/aerie-bench tests/aerie-dump-logits tests/gpu_test tests/tp_parity_test"}
for b in $BINS; do cp "$BD/$b" .device/bin/; done
strip .device/bin/* || true
BUNDLE=${DEVICE_BUNDLE:-../shared/tools/device-bundle}
bash "$BUNDLE" runtime .device .device/bin/*
tar czf .device.tgz .device
du -sh .device .device.tgz
