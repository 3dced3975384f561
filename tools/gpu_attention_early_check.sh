#!/usr/bin/env bash
# On one H200 (device kind nvidia-h200): gpu_test (every CUDA op against the CPU), then decode
# steps against the HBM floor with the attention's early K/V copy (attention.hpp: old keys'
# rows copied before waiting for the previous kernel) on and off (AERIE_ATTN_EARLY_KV=0), and
# with the split merge letting the o_proj GEMV start first (AERIE_ATTN_COMBINE_TRIGGER_FIRST=1),
# interleaved over ROUNDS rounds (tools/gpu_decode_build_ab.sh: 8B shape at BATCHES_8B, 1B and
# SmolLM2-135M at batch 1). Here, first:
#   BUILD_DIR=build BINS="launch/aerie-bench tests/gpu_test" bash tools/device_pack.sh
#   device run (carry [".device.tgz"]): bash tools/gpu_attention_early_check.sh
# SKIP_GPU_TEST=1 skips gpu_test (a second call on the same build).
set -uo pipefail
RESULTS=${OUT:-/tmp/aerie-gpu-attention-early}
source "$(dirname "$0")/gpu_steps.sh"
if [[ ${SKIP_GPU_TEST:-0} != 1 ]]; then
  STEP_TAIL=3 step gpu_test 240 "$B/gpu_test"
  pack_logs
  mv "$RESULTS/logs.tgz" "$RESULTS/gpu_test_logs.tgz"
fi
VARIANTS=${VARIANTS:-"early late:AERIE_ATTN_EARLY_KV=0 trigger:AERIE_ATTN_COMBINE_TRIGGER_FIRST=1"} \
  BATCHES_8B=${BATCHES_8B:-1,32} SMOLLM2=${SMOLLM2:-1} ROUNDS=${ROUNDS:-2} DEADLINE_S=${DEADLINE_S:-300} \
  bash "$(dirname "$0")/gpu_decode_build_ab.sh" || status=1
exit $status
