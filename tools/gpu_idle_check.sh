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
args=(--load-format dummy --model-shape llama-3.2-1b --device cuda --max-new-tokens 32 --temperature 0 --ignore-eos
      --max-total-tokens 65536 --output json)
for i in $(seq 1 32); do args+=(--input-ids "$(python3 -c "import random; r=random.Random($i); print(','.join(str(r.randrange(3,128000)) for _ in range(r.randint(1,200))))")"); done
timeout 120 "$B/aerie-generate" "${args[@]}" > "$RESULTS/overlap_on.jsonl" 2> "$LOGS/overlap_on.txt" || status=1
timeout 120 "$B/aerie-generate" "${args[@]}" --disable-overlap-schedule > "$RESULTS/overlap_off.jsonl" 2> "$LOGS/overlap_off.txt" || status=1
compare "$RESULTS/overlap_off.jsonl" "$RESULTS/overlap_on.jsonl"
STEP_TAIL=10 step idle_fraction 500 python3 tools/gpu_idle_fraction.py --serve "$B/aerie-serve" --bench "$B/aerie-bench" \
  --json "$RESULTS/gpu_idle_fraction.json" ${IDLE_ARGS:-}
pack_logs
exit $status
