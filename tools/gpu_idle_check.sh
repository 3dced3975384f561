#!/usr/bin/env bash
# On one H200 (device kind nvidia-h200), with .device.tgz from tools/device_pack.sh carried:
# issue #15's first measurement, the GPU's idle fraction in a served workload
# (tools/gpu_idle_fraction.py: 8B shape, bf16, plain and EAGLE3, 1 / 32 / 256 streams).
#   device run (carry [".device.tgz"]): bash tools/gpu_idle_check.sh
set -uo pipefail
RESULTS=${OUT:-/tmp/aerie-gpu-idle}
source "$(dirname "$0")/gpu_steps.sh"
STEP_TAIL=8 step idle_fraction 560 python3 tools/gpu_idle_fraction.py --serve "$B/aerie-serve" --bench "$B/aerie-bench" \
  --json "$RESULTS/gpu_idle_fraction.json"
pack_logs
exit $status
