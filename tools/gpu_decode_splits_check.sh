#!/usr/bin/env bash
# On one H200 (device kind nvidia-h200): the attention split policy once the query blocks fill
# the SMs (kernels/attention.hpp's kAttentionBlocksPerSmFull: no split) against forced blocks per
# SM (AERIE_ATTN_BLOCKS_PER_SM), as decode steps of the 8B shape at batch 32, 64 and 128
# (tools/gpu_decode_build_ab.sh, interleaved), after gpu_test (every CUDA op against the CPU).
# (Commit 273ffcd's version of this script also measured 3 and 4 tile buffers a warp in the
# tensor-core decode attention: docs/results/decode_attention_stages_splits_h200.txt.) Here, first:
#   BUILD_DIR=build BINS="launch/aerie-bench tests/gpu_test" bash tools/device_pack.sh
#   device run (carry [".device.tgz"]): bash tools/gpu_decode_splits_check.sh
set -uo pipefail
RESULTS=${OUT:-/tmp/aerie-gpu-decode-splits}
source "$(dirname "$0")/gpu_steps.sh"
STEP_TAIL=3 step gpu_test 240 "$B/gpu_test"
pack_logs
mv "$RESULTS/logs.tgz" "$RESULTS/gpu_test_logs.tgz"
VARIANTS=${VARIANTS:-"unsplit bpsm4:AERIE_ATTN_BLOCKS_PER_SM=4"} BATCHES_8B=${BATCHES_8B:-32,64,128} ROUNDS=${ROUNDS:-2} \
  bash "$(dirname "$0")/gpu_decode_build_ab.sh" || status=1
exit $status
