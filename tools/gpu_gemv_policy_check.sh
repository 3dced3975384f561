#!/usr/bin/env bash
# On one H200 (device kind nvidia-h200): which GEMV serves a product at small batch, measured
# (kernels/cuda/ops_matmul.cu's knobs; docs/performance.md "One-row products on the tensor cores,
# narrow products of a verify on the CUDA cores"):
#   AERIE_GEMV_ONE_ROW_MMA_MIN_N / _MAX_K: one-row products of at least that many weight rows (and
#     at most that K) on the tensor-core GEMV instead of the CUDA-core one (plain decode at batch 1);
#   AERIE_GEMV_NARROW_CUDA_CORE_N: products of 3-8 rows over at most that many weight rows on the
#     CUDA-core GEMV, two weight rows a block (a verify's o_proj and down_proj on SmolLM2).
# First gpu_test (every op against the CPU; skipped with SKIP_GPU_TEST=1), then its GEMV, fused-
# epilogue and whole-model tests again with both knobs sending every product they can to the
# other GEMV, then decode steps (tools/gpu_decode_build_ab.sh) under VARIANTS.
# Needs .device.tgz (BUILD_DIR=build BINS="launch/aerie-bench tests/gpu_test" bash tools/device_pack.sh).
#   device run (carry [".device.tgz"]): OUT=$OUT bash tools/gpu_gemv_policy_check.sh
set -uo pipefail
RESULTS=${OUT:-/tmp/aerie-gpu-gemv-policy}
source "$(dirname "$0")/gpu_steps.sh"
[[ -n ${SKIP_GPU_TEST:-} ]] || STEP_TAIL=3 step gpu_test 400 "$B/gpu_test"
STEP_TAIL=3 step gpu_test_other_gemvs 300 env AERIE_GEMV_ONE_ROW_MMA_MIN_N=1 AERIE_GEMV_NARROW_CUDA_CORE_N=100000 "$B/gpu_test" \
  --gtest_filter='CudaOps.Gemv*:CudaOps.GateUpSilu*:CudaOps.QkvRope*:CudaModel.*'
main_status=$status
VARIANTS=${VARIANTS:-"now onerow:AERIE_GEMV_ONE_ROW_MMA_MIN_N=3072 onerowk:AERIE_GEMV_ONE_ROW_MMA_MIN_N=3072,AERIE_GEMV_ONE_ROW_MMA_MAX_K=2048 narrow:AERIE_GEMV_NARROW_CUDA_CORE_N=576"} \
  SMOLLM2=1 BATCHES_8B=${BATCHES_8B:-1} BATCHES_1B=${BATCHES_1B:-1} BATCHES_SMOLLM2=${BATCHES_SMOLLM2:-1,4,8} \
  OUT=$RESULTS/decode bash tools/gpu_decode_build_ab.sh
decode_status=$?
pack_logs
[[ $main_status -eq 0 && $decode_status -eq 0 ]]
