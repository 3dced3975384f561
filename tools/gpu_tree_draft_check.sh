#!/usr/bin/env bash
# On one H200 (device kind nvidia-h200), with .device.tgz from tools/device_pack.sh carried:
# tree drafting on the device (issue #14 item 2, spec/draft_tree_runner.hpp).
#   tests: every gpu test (CudaTreeDraft.*: the expansion kernels against the CPU;
#          CudaDraftTree.GraphsProposeWhatStepByStepDraftingProposes: graphs per bucket, padded,
#          garbage in the dummy slot; the speculative equality tests, whose trees now draft on the device).
#   bench: aerie-bench speculative, Llama-3.1-8B shape, EAGLE3 head of 32,000 draft tokens, trees
#          (topk 4, 8 tokens, 3 steps; topk 8, 32 tokens, 5 steps) drafted step by step and by the
#          runner in the same run (--draft-runner both), and the chain of 3 for comparison.
#   eval:  SmolLM2 with the trained head, when .device_model/ holds the GGUF's parts.
#   smollm2: aerie-bench speculative / one-batch at SmolLM2's shape (random weights): a round's stages.
#   trees: the same with larger trees (topk 4 x 5 steps, 16 tokens; topk 8 x 5 steps, 32 tokens), greedy.
#   device run (carry [".device.tgz"]): bash tools/gpu_tree_draft_check.sh [tests|bench|eval|trees|smollm2|all]
set -uo pipefail
PART=${1:-all}
RESULTS=${OUT:-/tmp/aerie-gpu-tree-draft}
source "$(dirname "$0")/gpu_steps.sh"
[[ $PART == tests || $PART == all ]] && step gpu_test 400 "$B/gpu_test" --gtest_brief=1
if [[ $PART == bench || $PART == all ]]; then
  SPEC="$B/aerie-bench speculative --model-shape llama-3.1-8b --rounds 20 --draft-vocab 32000 --algorithm EAGLE3 --draft-runner both"
  step tree8 150 $SPEC --batch-size 1,8,32 --speculative-num-steps 3 --speculative-eagle-topk 4 --speculative-num-draft-tokens 8 \
    --json "$RESULTS/tree_draft_8b_s3k4n8.json"
  step tree32 150 $SPEC --batch-size 1,8 --speculative-num-steps 5 --speculative-eagle-topk 8 --speculative-num-draft-tokens 32 \
    --json "$RESULTS/tree_draft_8b_s5k8n32.json"
  step chain3 100 $SPEC --batch-size 1,8,32 --speculative-num-steps 3 --json "$RESULTS/tree_draft_8b_chain3.json"
fi
# Where a round of the real model's shape goes (random weights: one token per round; the stages
# show what a round costs the worker whatever it accepts).
if [[ $PART == smollm2 ]]; then
  SPEC="$B/aerie-bench speculative --model-shape smollm2-135m --rounds 50 --draft-vocab 16384 --algorithm EAGLE3 --batch-size 1,8 --input-len 128"
  step s_chain3 100 $SPEC --speculative-num-steps 3 --json "$RESULTS/tree_draft_smollm2_chain3.json"
  step s_tree8x5 100 $SPEC --speculative-num-steps 5 --speculative-eagle-topk 8 --speculative-num-draft-tokens 32 \
    --json "$RESULTS/tree_draft_smollm2_s5k8n32.json"
  step s_plain 100 "$B/aerie-bench" one-batch --model-shape smollm2-135m --load-format dummy --batch-size 1,8 --input-len 128 \
    --output-len 64 --cuda-graph on
fi
[[ $PART == eval || $PART == all ]] && smollm2_eval eagle3_eval_h200_tree_draft.json
# Larger trees, now that they draft on the device (issue #19's accept length and speedup goals).
[[ $PART == trees ]] && smollm2_eval eagle3_eval_h200_trees.json --temperature 0 \
  --configs plain chain-3 chain-5 tree-4x3-8 tree-4x5-16 tree-8x5-32
pack_logs
exit $status
