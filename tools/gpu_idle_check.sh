#!/usr/bin/env bash
# On one H200 (device kind nvidia-h200), with .device.tgz from tools/device_pack.sh carried
# (BINS="launch/aerie-serve launch/aerie-bench launch/aerie-generate" is enough):
# issue #15's measurements: the same greedy tokens with overlap scheduling on and off
# (aerie-generate, Llama-3.2-1B shape, 32 prompts), then the GPU's idle fraction in a served
# workload (tools/gpu_idle_fraction.py: 8B shape, bf16; plain with overlap on and off, and
# EAGLE3; 1 / 32 / 256 streams).
#   device run (carry [".device.tgz"]): bash tools/gpu_idle_check.sh
set -uo pipefail
RESULTS=${OUT:-/tmp/aerie-gpu-idle}
source "$(dirname "$0")/gpu_steps.sh"
overlap_tokens_check
STEP_TAIL=10 step idle_fraction 500 python3 tools/gpu_idle_fraction.py --serve "$B/aerie-serve" --bench "$B/aerie-bench" \
  --json "$RESULTS/gpu_idle_fraction.json" ${IDLE_ARGS:-}
pack_logs
exit $status
