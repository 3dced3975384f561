#!/usr/bin/env bash
# On one H200 (device kind nvidia-h200), with .device.tgz from tools/device_pack.sh carried:
# the single-GPU test suite (every CUDA op against the CPU reference, graphs, speculation)
# and an end-to-end greedy run with penalties and logit_bias on the GPU against the same
# flags on the CPU (tiny model, fp32 both).
#   device run (carry [".device.tgz"]): bash tools/gpu_quick_check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
RESULTS=${OUT:-/tmp/aerie-gpu-quick}
source tools/gpu_steps.sh
step gpu_test 300 "$B/gpu_test" --gtest_brief=1
PEN=(--load-format dummy --model-shape tiny --max-new-tokens 24 --temperature 0 --output json --dtype f32
     --repetition-penalty 1.3 --frequency-penalty 0.5 --presence-penalty 0.2 --min-new-tokens 8 --logit-bias 7:3 --logit-bias 11:-20
     --input-ids 5,6,7,8 --input-ids 9,10,11 --input-ids 300,17)
step penalties_cpu 60 "$B/aerie-generate" "${PEN[@]}" --device cpu
step penalties_cuda 60 "$B/aerie-generate" "${PEN[@]}" --device cuda
if diff <(grep '^{' "$LOGS/penalties_cpu.txt") <(grep '^{' "$LOGS/penalties_cuda.txt") > /dev/null; then
  echo "penalties: CUDA output equals CPU output" | tee "$RESULTS/penalties_summary.txt"
else
  echo "penalties: CUDA output differs from CPU" | tee "$RESULTS/penalties_summary.txt"; status=1
fi
pack_logs
exit $status
