#!/usr/bin/env bash
# On the GPU machine (device tool), with .device/ from tools/device_pack.sh carried along:
# measures the verify against a plain step under the knobs that shape it, so that the
# defaults are chosen from figures (docs/performance.md):
#   AERIE_ATTN_BLOCKS_PER_SM      attention splits: about this many blocks per SM
#   AERIE_ATTN_TOKENS_PER_BLOCK   query tokens of a sequence one attention block serves
#   AERIE_GEMV_MMA_VEC            16-byte chunks per row and step in the tensor-core GEMV
#   --no-verify-graphs            chain verifies eager instead of replayed graphs
# Runs gpu_test first (correctness of every variant's kernels), then the kernel table for
# 1-8 rows, `aerie-bench speculative` (EAGLE3, batch 1/8/32, 1/3/7 draft steps) per
# variant, and plain decode (`one-batch`). Logs go to $OUT/logs.tgz (one file: the device
# tool brings back only a few).
set -uo pipefail
RESULTS=${OUT:-/tmp/aerie-gpu-verify}
STEP_TAIL=3
source "$(dirname "$0")/gpu_steps.sh"
step gpu_test 300 "$B/gpu_test" --gtest_brief=1
step kernels_rows 120 "$B/aerie-bench" kernels --model-shape llama-3.1-8b --batch-size 1,2,4,8
grep -E "^(attn|attention|gate_up |lm_head )" "$LOGS/kernels_rows.txt"
SPEC="$B/aerie-bench speculative --model-shape llama-3.1-8b --rounds 12 --batch-size 1,8,32 --algorithm EAGLE3"
for variant in default AERIE_ATTN_TOKENS_PER_BLOCK=1 AERIE_ATTN_TOKENS_PER_BLOCK=2 AERIE_ATTN_TOKENS_PER_BLOCK=4 no-verify-graphs; do
  envs=(); flags=()
  case $variant in default) ;; no-verify-graphs) flags=(--no-verify-graphs) ;; *) envs=($variant) ;; esac
  for steps in 1 3 7; do
    step "spec_${variant}_s$steps" 120 env "${envs[@]}" $SPEC "${flags[@]}" --speculative-num-steps $steps --json "$LOGS/spec_${variant}_s$steps.json"
  done
done
step decode 200 "$B/aerie-bench" one-batch --load-format dummy --model-shape llama-3.1-8b --batch-size 1,8,32,128 --input-len 512 \
  --output-len 32 --cuda-graph both --json "$LOGS/bench_llama-3.1-8b.json"
pack_logs
exit $status
