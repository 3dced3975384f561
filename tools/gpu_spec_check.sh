#!/usr/bin/env bash
# On the GPU machine (device tool), with .device/ from tools/device_pack.sh carried along:
# the GPU tests (speculative greedy equality for chains and trees included), the GEMV vs
# cuBLAS kernel table for 1-8 rows, and `aerie-bench speculative` at the Llama-3.1-8B shape
# (random weights; EAGLE3 and EAGLE heads, STANDALONE self-draft): chains of 3 and 7 draft
# tokens and trees, at batch 1, 8 and 32; one run with cuBLAS for 3-8 rows instead of the
# tensor-core GEMV (--gemv-max-rows 2), one with the draft in-process (the cost of the
# DraftWorker actor hop), one with eager verifies (what the verify graphs save), and plain
# decode (`one-batch`) for the decode table.
# Logs and JSON go to $OUT/logs.tgz (one file: the device tool brings back only a few).
set -uo pipefail
RESULTS=${OUT:-/tmp/aerie-gpu-spec}
source "$(dirname "$0")/gpu_steps.sh"
step gpu_test 240 "$B/gpu_test" --gtest_brief=1
step kernels_rows 90 "$B/aerie-bench" kernels --model-shape llama-3.1-8b --batch-size 1,2,4,8
SPEC="$B/aerie-bench speculative --model-shape llama-3.1-8b --rounds 12"
step spec_steps3 150 $SPEC --batch-size 1,8,32 --speculative-num-steps 3 --json "$LOGS/spec_8b_steps3.json"
step spec_steps7 120 $SPEC --batch-size 1,8,32 --speculative-num-steps 7 --json "$LOGS/spec_8b_steps7.json"
step spec_steps3_cublas 90 $SPEC --batch-size 1,8 --speculative-num-steps 3 --gemv-max-rows 2 --algorithm EAGLE3 \
  --json "$LOGS/spec_8b_steps3_cublas.json"
step spec_tree_s3k4n8 90 $SPEC --batch-size 1,8 --speculative-num-steps 3 --speculative-eagle-topk 4 --speculative-num-draft-tokens 8 \
  --algorithm EAGLE3,STANDALONE --json "$LOGS/spec_8b_tree_s3k4n8.json"
step spec_tree_s5k8n32 90 $SPEC --batch-size 1,8 --speculative-num-steps 5 --speculative-eagle-topk 8 --speculative-num-draft-tokens 32 \
  --algorithm EAGLE3,STANDALONE --json "$LOGS/spec_8b_tree_s5k8n32.json"
step spec_steps3_inprocess 60 $SPEC --batch-size 1,8 --speculative-num-steps 3 --algorithm EAGLE3 --no-draft-actor \
  --json "$LOGS/spec_8b_steps3_inprocess.json"
step spec_steps1 60 $SPEC --batch-size 1,8 --speculative-num-steps 1 --algorithm EAGLE3 --json "$LOGS/spec_8b_steps1.json"
for steps in 3 7; do
  step spec_steps${steps}_eager_verify 60 $SPEC --batch-size 1,8 --speculative-num-steps $steps --algorithm EAGLE3 --no-verify-graphs \
    --json "$LOGS/spec_8b_steps${steps}_eager_verify.json"
done
step decode 200 "$B/aerie-bench" one-batch --load-format dummy --model-shape llama-3.1-8b --batch-size 1,8,32,128 --input-len 512 \
  --output-len 32 --cuda-graph both --json "$LOGS/bench_llama-3.1-8b.json"
pack_logs
exit $status
