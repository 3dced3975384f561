#!/usr/bin/env bash
# On one H200 (device kind nvidia-h200): issue #15's overlap-scheduling measurements.
#   idle:    with .device.tgz from tools/device_pack.sh carried (BINS="launch/aerie-serve
#            launch/aerie-bench launch/aerie-generate"): tools/gpu_idle_check.sh (greedy tokens
#            with overlap on and off; the device's idle time between forwards, plain and EAGLE3,
#            overlap on and off, 1 / 32 / 256 streams).
#   smollm2: with .device_model/ (the GGUF's parts and sha256, tools/gpu_smollm2_bench.sh says
#            how) on the machine: SmolLM2 + the trained EAGLE-3 head against plain decoding
#            (eval_spec.py), batch 1 and 8, greedy, with overlap on and off.
#   device run: bash tools/gpu_overlap_check.sh idle|smollm2
set -uo pipefail
what=${1:-idle}
RESULTS=${OUT:-/tmp/aerie-gpu-overlap}
if [[ $what == idle ]]; then
  exec bash "$(dirname "$0")/gpu_idle_check.sh"
fi
source "$(dirname "$0")/gpu_steps.sh"
configs=(--configs plain chain-3 tree-4x3-8 tree-8x5-32 --temperature 0)
smollm2_eval eagle3_eval_h200_overlap.json "${configs[@]}" --extra=--enable-spec-overlap
smollm2_eval eagle3_eval_h200_no_overlap.json "${configs[@]}" --extra=--disable-overlap-schedule
pack_logs
exit $status
