#!/usr/bin/env bash
# On one H200 (device kind nvidia-h200), with .device.tgz from tools/device_pack.sh carried
# (BINS="launch/aerie-bench tests/gpu_test"): the EAGLE head with FP8 weights
# (--speculative-draft-model-quantization fp8, issue #14's propose goal).
#   tests: every gpu test (CudaOps.Fp8WeightsMatchCpu: the fp8 GEMVs and tiles against the CPU).
#   bench: aerie-bench speculative, Llama-3.1-8B shape, EAGLE3 head of 32,000 draft tokens, the
#          draft runner as served, the head as loaded (bf16) and in fp8 in the same run: chains
#          of 3 and 5 steps at batch 1/8/32, a tree (topk 4, 3 steps, 8 tokens) at batch 1/8;
#          SmolLM2's shape, chain 3, batch 1/8.
#   repeat: chain 3 at batch 1, three more runs (the spread of the batch-1 goal's figures).
#   device run (carry [".device.tgz"]): bash tools/gpu_fp8_draft_check.sh [tests|bench|repeat|all]
set -uo pipefail
PART=${1:-all}
RESULTS=${OUT:-/tmp/aerie-gpu-fp8-draft}
source "$(dirname "$0")/gpu_steps.sh"
[[ $PART == tests || $PART == all ]] && step gpu_test 420 "$B/gpu_test" --gtest_brief=1
if [[ $PART == bench || $PART == all ]]; then
  SPEC="$B/aerie-bench speculative --rounds 20 --algorithm EAGLE3 --draft-chain runner --speculative-draft-model-quantization none fp8"
  step chain3 150 $SPEC --model-shape llama-3.1-8b --draft-vocab 32000 --batch-size 1,8,32 --speculative-num-steps 3 --json "$RESULTS/fp8_draft_8b_chain3.json"
  step chain5 150 $SPEC --model-shape llama-3.1-8b --draft-vocab 32000 --batch-size 1,8,32 --speculative-num-steps 5 --json "$RESULTS/fp8_draft_8b_chain5.json"
  step tree 150 $SPEC --model-shape llama-3.1-8b --draft-vocab 32000 --batch-size 1,8 --speculative-num-steps 3 --speculative-eagle-topk 4 \
    --speculative-num-draft-tokens 8 --json "$RESULTS/fp8_draft_8b_tree.json"
  step smollm2 90 $SPEC --model-shape smollm2-135m --draft-vocab 0 --batch-size 1,8 --speculative-num-steps 3 --json "$RESULTS/fp8_draft_smollm2_chain3.json"
fi
if [[ $PART == repeat || $PART == all ]]; then
  SPEC="$B/aerie-bench speculative --rounds 20 --algorithm EAGLE3 --draft-chain runner --speculative-draft-model-quantization none fp8"
  for i in 1 2 3; do
    step repeat$i 90 $SPEC --model-shape llama-3.1-8b --draft-vocab 32000 --batch-size 1 --speculative-num-steps 3 --json "$RESULTS/fp8_draft_8b_chain3_b1_repeat$i.json"
  done
fi
pack_logs
exit $status
