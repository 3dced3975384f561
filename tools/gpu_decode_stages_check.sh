#!/usr/bin/env bash
# On one H200 (device kind nvidia-h200): the tensor-core decode attention's tile pipeline
# (AERIE_ATTN_DECODE_STAGES: 2 buffers a warp, the default, or 3 and 4) with the split policy's
# blocks per SM (AERIE_ATTN_BLOCKS_PER_SM), measured as decode steps of the 8B shape at batch 16,
# 32, 64 and 128 (tools/gpu_decode_build_ab.sh, interleaved); first gpu_test (every CUDA op
# against the CPU), and its tensor-core attention tests again with 3 and 4 buffers. Here, first:
#   BUILD_DIR=build BINS="launch/aerie-bench tests/gpu_test" bash tools/device_pack.sh
#   device run (carry [".device.tgz"]): bash tools/gpu_decode_stages_check.sh
set -uo pipefail
RESULTS=${OUT:-/tmp/aerie-gpu-decode-stages}
source "$(dirname "$0")/gpu_steps.sh"
STEP_TAIL=3 step gpu_test 240 "$B/gpu_test"
for stages in 3 4; do
  STEP_TAIL=3 step "gpu_test_attention_stages$stages" 120 env AERIE_ATTN_DECODE_STAGES=$stages "$B/gpu_test" --gtest_filter='*Attention*'
done
pack_logs
mv "$RESULTS/logs.tgz" "$RESULTS/gpu_test_logs.tgz"
VARIANTS=${VARIANTS:-"s2 s3:AERIE_ATTN_DECODE_STAGES=3 s4:AERIE_ATTN_DECODE_STAGES=4 s2b1:AERIE_ATTN_BLOCKS_PER_SM=1 s3b1:AERIE_ATTN_DECODE_STAGES=3,AERIE_ATTN_BLOCKS_PER_SM=1 s4b1:AERIE_ATTN_DECODE_STAGES=4,AERIE_ATTN_BLOCKS_PER_SM=1"} \
  BATCHES_8B=${BATCHES_8B:-16,32,64,128} ROUNDS=${ROUNDS:-2} bash "$(dirname "$0")/gpu_decode_build_ab.sh" || status=1
exit $status
