#!/usr/bin/env bash
# On one H200 (device kind nvidia-h200): which GEMV serves a small product, measured
# (kernels/gemv_rules.hpp's knobs; docs/performance.md "Which GEMV a small product takes"):
#   AERIE_GEMV_SHORT_K_MMA_MIN_N / AERIE_GEMV_SHORT_K_MAX (/ _TWO_ROWS): one- and two-row products
#     of at least that many weight rows and at most that K on the tensor-core GEMV (default 577
#     rows, K below 1024, two rows up to 2048; 8192 rows was the rule before: only an LM head);
#   AERIE_GEMV_NARROW_CUDA_CORE_N: products of 3-8 rows over at most that many weight rows on the
#     CUDA-core GEMV, two weight rows a block (default 576; 0: none, as before).
# First gpu_test (every op against the CPU; skipped with SKIP_GPU_TEST=1), then its GEMV, fused-
# epilogue and whole-model tests again with the knobs sending every product they can to the
# other GEMV, then decode steps (tools/gpu_decode_build_ab.sh) under VARIANTS.
# Needs .device.tgz (BUILD_DIR=build BINS="launch/aerie-bench tests/gpu_test" bash tools/device_pack.sh).
#   device run (carry [".device.tgz"]): OUT=$OUT bash tools/gpu_gemv_policy_check.sh
set -uo pipefail
RESULTS=${OUT:-/tmp/aerie-gpu-gemv-policy}
source "$(dirname "$0")/gpu_steps.sh"
[[ -n ${SKIP_GPU_TEST:-} ]] || STEP_TAIL=3 step gpu_test 400 "$B/gpu_test"
STEP_TAIL=3 step gpu_test_other_gemvs 300 env AERIE_GEMV_SHORT_K_MMA_MIN_N=1 AERIE_GEMV_SHORT_K_MAX=100000 AERIE_GEMV_NARROW_CUDA_CORE_N=100000 "$B/gpu_test" \
  --gtest_filter='CudaOps.Gemv*:CudaOps.GateUpSilu*:CudaOps.QkvRope*:CudaModel.*'
main_status=$status
VARIANTS=${VARIANTS:-"now before:AERIE_GEMV_SHORT_K_MMA_MIN_N=8192,AERIE_GEMV_NARROW_CUDA_CORE_N=0"} \
  SMOLLM2=1 BATCHES_8B=${BATCHES_8B:-1} BATCHES_1B=${BATCHES_1B:-1} BATCHES_SMOLLM2=${BATCHES_SMOLLM2:-1,2,3,4,5,6,8} \
  OUT=$RESULTS/decode bash tools/gpu_decode_build_ab.sh
decode_status=$?
pack_logs
[[ $main_status -eq 0 && $decode_status -eq 0 ]]
