#!/usr/bin/env bash
# On one H200 (device kind nvidia-h200): gpu_test (every CUDA op against the CPU), then decode
# steps against the HBM floor with the decode graphs captured for an 8192-token context, as
# aerie-serve captures them for SmolLM2 (the split count then is the most the GPU takes: 64 at
# batch 1), 512-token prompts: at least kAttentionMinSplitKeys keys a split (attention.hpp: a short
# sequence uses fewer splits, the rest stay empty) against every split used however short
# (AERIE_ATTN_MIN_SPLIT_KEYS=1, the kernels before), and the graphs captured for the prompt's own
# context (the bench's default) beside them; interleaved over ROUNDS rounds
# (tools/gpu_decode_build_ab.sh: 8B shape at BATCHES_8B, 1B and SmolLM2-135M at batch 1). Here, first:
#   BUILD_DIR=build BINS="launch/aerie-bench tests/gpu_test" bash tools/device_pack.sh
#   device run (carry [".device.tgz"]): bash tools/gpu_attention_splits_context_check.sh
# SKIP_GPU_TEST=1 skips gpu_test (a second call on the same build).
set -uo pipefail
RESULTS=${OUT:-/tmp/aerie-gpu-attention-splits-context}
source "$(dirname "$0")/gpu_steps.sh"
if [[ ${SKIP_GPU_TEST:-0} != 1 ]]; then
  STEP_TAIL=3 step gpu_test 300 "$B/gpu_test"
  pack_logs
  mv "$RESULTS/logs.tgz" "$RESULTS/gpu_test_logs.tgz"
fi
VARIANTS=${VARIANTS:-"min32:--graph-context=8192 all:--graph-context=8192,AERIE_ATTN_MIN_SPLIT_KEYS=1 own"} \
  BATCHES_8B=${BATCHES_8B:-1,4,8,32} SMOLLM2=${SMOLLM2:-1} ROUNDS=${ROUNDS:-3} DEADLINE_S=${DEADLINE_S:-300} \
  bash "$(dirname "$0")/gpu_decode_build_ab.sh" || status=1
exit $status
