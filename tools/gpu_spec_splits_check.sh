#!/usr/bin/env bash
# On one H200 (device kind nvidia-h200): what a speculative round of the SmolLM2-135M shape costs
# (aerie-bench speculative: random weights and a random EAGLE-3 head over 16,384 draft tokens, so
# one token a round and a round's cost is what is measured; chain of 5 steps; 200-token prompts;
# batch 1 and 8) with the verify and draft graphs captured for an 8192-token context, as
# aerie-serve captures them for SmolLM2: at least kAttentionMinSplitKeys keys a split (attention.hpp)
# against every split used (AERIE_ATTN_MIN_SPLIT_KEYS=1, the kernels before), and the graphs
# captured for the rounds' own context beside them; interleaved over ROUNDS rounds (default 2).
# Here, first:
#   BUILD_DIR=build BINS="launch/aerie-bench" bash tools/device_pack.sh
#   device run (carry [".device.tgz"]): bash tools/gpu_spec_splits_check.sh
set -uo pipefail
RESULTS=${OUT:-/tmp/aerie-gpu-spec-splits}
source "$(dirname "$0")/gpu_steps.sh"
SPEC=("$B/aerie-bench" speculative --model-shape smollm2-135m --algorithm EAGLE3 --draft-vocab 16384 --batch-size 1,8
      --speculative-num-steps 5 --input-len 200 --rounds 50)
for round in $(seq 1 "${ROUNDS:-2}"); do
  STEP_TAIL=6 step "all_$round" 200 env AERIE_ATTN_MIN_SPLIT_KEYS=1 "${SPEC[@]}" --graph-context 8192 --json "$LOGS/all_$round.json"
  STEP_TAIL=6 step "min32_$round" 200 "${SPEC[@]}" --graph-context 8192 --json "$LOGS/min32_$round.json"
  STEP_TAIL=6 step "own_$round" 200 "${SPEC[@]}" --json "$LOGS/own_$round.json"
done
pack_logs
exit $status
