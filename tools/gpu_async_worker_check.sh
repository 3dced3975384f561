#!/usr/bin/env bash
# On one H200 (device kind nvidia-h200), with .device.tgz from tools/device_pack.sh carried
# (BINS="launch/aerie-serve launch/aerie-bench launch/aerie-generate tests/gpu_test"): issue
# #15's device-side future tokens and the worker that enqueues the next batch before the last
# one's tokens are back. The gpu tests (every CUDA op against the CPU, graph and eager
# speculative decoding), greedy tokens with overlap on and off (tools/gpu_idle_check.sh's
# aerie-generate run), then the device's idle time between forwards, plain decoding with overlap
# on and off, on the 8B shape (1 / 32 / 256 streams) and the launch-bound SmolLM2-135M shape
# (1 / 32 streams; dummy weights).
#   device run (carry [".device.tgz"]): bash tools/gpu_async_worker_check.sh
set -uo pipefail
RESULTS=${OUT:-/tmp/aerie-gpu-async}
source "$(dirname "$0")/gpu_steps.sh"
STEP_TAIL=6 step gpu_test 200 "$B/gpu_test"
overlap_tokens_check
STEP_TAIL=8 step idle_8b 200 python3 tools/gpu_idle_fraction.py --serve "$B/aerie-serve" --bench "$B/aerie-bench" \
  --json "$RESULTS/gpu_idle_fraction_async.json" --modes plain plain-sync
STEP_TAIL=6 step idle_smollm2 150 python3 tools/gpu_idle_fraction.py --serve "$B/aerie-serve" --bench "$B/aerie-bench" \
  --json "$RESULTS/gpu_idle_fraction_async_smollm2.json" --modes plain plain-sync --model-shape smollm2-135m --concurrency 1 32
pack_logs
exit $status
