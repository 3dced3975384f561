#!/usr/bin/env bash
# On one H200 (device kind nvidia-h200), with .device.tgz from tools/device_pack.sh carried:
# one- and two-row GEMVs over a short K (< 1024) on the tensor-core path (kernels/cuda/ops_matmul.cu,
# launch_gemv_few), against the CUDA-core path (AERIE_GEMV_SHORT_K_MMA=0) in the same call.
#   tests: the gpu tests (CudaOps.Gemv*, GateUpSilu*, QkvRope*: both paths against the CPU).
#   bench: aerie-bench kernels at SmolLM2's shape (the LM head, 49152 x 576) and one-batch decode
#          of SmolLM2's and the 8B shape (K >= 4096: unchanged).
#   eval:  SmolLM2 + the trained head (plain, chains, the largest tree), when .device_model/ holds the GGUF's parts.
#   device run (carry [".device.tgz"]): bash tools/gpu_short_k_gemv_check.sh [tests|bench|eval|all]
set -uo pipefail
PART=${1:-all}
RESULTS=${OUT:-/tmp/aerie-gpu-short-k}
source "$(dirname "$0")/gpu_steps.sh"
[[ $PART == tests || $PART == all ]] && step gpu_test 400 "$B/gpu_test" --gtest_brief=1
if [[ $PART == bench || $PART == all ]]; then
  for mma in 1 0; do
    step kernels_mma$mma 100 env AERIE_GEMV_SHORT_K_MMA=$mma "$B/aerie-bench" kernels --model-shape smollm2-135m --batch-size 1,2 --context 160
    step smollm2_mma$mma 100 env AERIE_GEMV_SHORT_K_MMA=$mma "$B/aerie-bench" one-batch --model-shape smollm2-135m --load-format dummy \
      --batch-size 1,2,8 --input-len 128 --output-len 64 --cuda-graph on --json "$RESULTS/short_k_smollm2_mma$mma.json"
  done
  step llama8b 150 "$B/aerie-bench" one-batch --model-shape llama-3.1-8b --load-format dummy --batch-size 1 --input-len 512 \
    --output-len 32 --cuda-graph on --json "$RESULTS/short_k_8b.json"
fi
[[ $PART == eval || $PART == all ]] && smollm2_eval eagle3_eval_h200_short_k.json --temperature 0 --configs plain chain-3 chain-5 tree-8x5-32
pack_logs
exit $status
