#!/usr/bin/env bash
# Builds Aerie with CUDA here (sm_90) and gathers what the GPU machine needs to run it into
# .device/ (git-ignored): binaries in .device/bin, the shared libraries it lacks in
# .device/lib, and all of it compressed into .device.tgz (git-ignored; the binaries carry
# every kernel, so uncompressed they pass the device tool's 64 MiB). Then: device run with
# carry [".device.tgz"] and a tools/gpu_*.sh script (which unpacks it).
# BUILD_DIR (default build-cuda) may name an existing CUDA build, e.g. tools/setup.sh's.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/cuda/bin:$PATH
BD=${BUILD_DIR:-build-cuda}
cmake -S . -B "$BD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DAERIE_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null
cmake --build "$BD" -j"$(nproc)"
rm -rf .device && mkdir -p .device/bin
bins="$BD/launch/aerie-generate $BD/launch/aerie-serve $BD/launch/aerie-bench $BD/tests/aerie-dump-logits \
      $BD/tests/gpu_test $BD/tests/tp_parity_test"
cp $bins .device/bin/
strip .device/bin/* || true
BUNDLE=${DEVICE_BUNDLE:-../shared/tools/device-bundle}
bash "$BUNDLE" runtime .device .device/bin/*
tar czf .device.tgz .device
du -sh .device .device.tgz
