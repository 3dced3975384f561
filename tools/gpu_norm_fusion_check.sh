#!/usr/bin/env bash
# On one H200 (device kind nvidia-h200): the norms inside the projections (kernels/rms_norm.hpp's
# InputNorm, model/decoder_layer.hpp's run_decoder_layer_norms_fused) checked and measured in one
# call. gpu_test first (the fused ops and the fused decode step equal the separate norm kernels to
# the bit), then decode steps with the fusion on and off (AERIE_FUSE_INPUT_NORM=0), interleaved:
# the 8B shape at batch 1, 2 and 32 (32 never fuses: the control), the 1B shape and SmolLM2 at
# batch 1 (tools/gpu_decode_build_ab.sh). Here, first:
#   BUILD_DIR=build BINS="launch/aerie-bench tests/gpu_test" bash tools/device_pack.sh
#   device run (carry [".device.tgz"]): bash tools/gpu_norm_fusion_check.sh
set -uo pipefail
RESULTS=${OUT:-/tmp/aerie-gpu-norm-fusion}
source "$(dirname "$0")/gpu_steps.sh"
STEP_TAIL=6 step gpu_test 240 "$B/gpu_test"
grep -E "^\[  (FAILED|PASSED|SKIPPED) " "$LOGS/gpu_test.txt" | head -20
pack_logs
mv "$RESULTS/logs.tgz" "$RESULTS/gpu_test_logs.tgz"
VARIANTS="fused unfused:AERIE_FUSE_INPUT_NORM=0" BATCHES_8B=${BATCHES_8B:-1,2,32} SMOLLM2=1 ROUNDS=${ROUNDS:-2} \
  bash "$(dirname "$0")/gpu_decode_build_ab.sh" || status=1
exit $status
