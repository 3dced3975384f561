#!/usr/bin/env bash
# #19's GPU figures in one device call (about 7 minutes on an H100 or H200), with the GGUF's parts
# and .device.tgz already on the machine (tools/device_model_gguf.sh says how they travel) and the
# shipped head in assets/:
#   1. chain depth at batch 1, 200 held-out prompts of 128 tokens, two interleaved rounds
#      (gpu_spec_setting_ab.sh: speedups, accept lengths, greedy answers equal to plain decoding's);
#   2. the same prompts as whole answers (up to 256 tokens, as the CPU's evaluation), chains of 4 and 5;
#   3. the issue's table: 96 prompts, batches 1 and 8, T = 0 and 0.7, chains of 3-5 and the tree
#      (topk 4, 8 draft tokens, 5 steps).
#   device run (carry the last GGUF part and nothing else; assets/ in the tree): bash tools/gpu_spec_goal_check.sh
# DEPTH_PROMPTS / DEPTH_ROUNDS / DEPTH_CONFIGS change step 1; DEPTH_ONLY=1 stops after it.
# Tables in $OUT/*.txt, the runs' JSON in $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/aerie-spec-goal}
mkdir -p "$OUT"
H=$PWD/assets/smollm2-eagle3
status=0
HEAD=$H SETTINGS="default:" CONFIGS="${DEPTH_CONFIGS:-plain chain-4 chain-5 chain-6 chain-7}" PROMPTS=${DEPTH_PROMPTS:-200} ROUNDS=${DEPTH_ROUNDS:-2} SKIP_GAPS=1 \
  bash tools/gpu_spec_setting_ab.sh > "$OUT/chain_depth.txt" 2>&1 || status=1
grep -A12 "^Real SmolLM2" "$OUT/chain_depth.txt"
grep "outputs equal" "$OUT/chain_depth.txt" | sort | uniq -c | head -20
[[ -z ${DEPTH_ONLY:-} ]] || exit $status
OUT=$OUT HEAD=$H PROMPTS=200 MAX_NEW=256 BATCHES=1 TEMPS=0 CONFIGS="plain chain-4 chain-5" NAME=eagle3_eval_256 \
  bash tools/gpu_eagle3_eval.sh 2>&1 | grep -vE "^(loading|making)" | tee "$OUT/whole_answers.txt" || status=1
OUT=$OUT HEAD=$H PROMPTS=96 BATCHES="1 8" TEMPS="0 0.7" CONFIGS="plain chain-3 chain-4 chain-5 tree-4x5-8" NAME=eagle3_eval_table \
  bash tools/gpu_eagle3_eval.sh 2>&1 | grep -vE "^(loading|making)" | tee "$OUT/table.txt" || status=1
exit $status
