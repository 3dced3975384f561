#!/usr/bin/env bash
# On one H200 (device kind nvidia-h200), issue #21: attention's KV splits merged inside the
# attention kernel (kernels/cuda/attention_split_merge.cuh) against the separate merge kernel
# (AERIE_ATTN_MERGE_IN_KERNEL=-1), in one call:
#  1. the GPU test suite (every CUDA op against the CPU reference; the in-kernel merge gives the
#     merge kernel's bits, launch after launch) -> $OUT/test/
#  2. decode steps against the HBM floor, both settings interleaved over two rounds: 8B shape at
#     batch 1 and 32, 1B and SmolLM2-135M shapes at batch 1 (tools/gpu_decode_build_ab.sh) -> $OUT/ab/
#  3. Nsight Compute's duration of every kernel of a 1B decode step at batch 1, caches not flushed
#     (tools/gpu_step_profile.sh decode1b) -> $OUT/profile/
# Here, first: BUILD_DIR=build BINS="launch/aerie-bench tests/gpu_test" bash tools/device_pack.sh
#   device run (carry [".device.tgz"]): bash tools/gpu_attention_merge_check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=${OUT:-/tmp/aerie-gpu-merge}
rc=0
OUT=$ROOT/test bash tools/gpu_quick_check.sh || rc=1
OUT=$ROOT/ab VARIANTS="merged separate:AERIE_ATTN_MERGE_IN_KERNEL=-1" BATCHES_8B=1,32 SMOLLM2=1 bash tools/gpu_decode_build_ab.sh || rc=1
[[ ${PROFILE:-1} == 1 ]] && { OUT=$ROOT/profile bash tools/gpu_step_profile.sh decode1b || rc=1; }
exit $rc
