#!/usr/bin/env bash
# On one H200 (device kind nvidia-h200), with .device.tgz from tools/device_pack.sh carried:
# tree verifies replaying CUDA graphs (issue #14 item 3).
#   tests: every gpu test (CudaModel.TreeVerifyGraphEqualsEagerUnderItsMask: graph against eager
#          logits, argmax and captured hidden states for full and padded buckets; the speculative
#          equality tests, whose trees now replay graphs).
#   bench: aerie-bench speculative, Llama-3.1-8B shape, EAGLE3 head of 32,000 draft tokens,
#          trees (topk 4, 8 tokens; topk 8, 32 tokens) at batch 1 and 8, verifies replaying graphs
#          and eager (--no-verify-graphs) in the same run.
#   eval:  SmolLM2 with the trained head, when .device_model/ holds the GGUF's parts.
#   device run (carry [".device.tgz"]): bash tools/gpu_tree_graph_check.sh [tests|bench|eval|all]
set -uo pipefail
PART=${1:-all}
RESULTS=${OUT:-/tmp/aerie-gpu-tree-graphs}
source "$(dirname "$0")/gpu_steps.sh"
[[ $PART == tests || $PART == all ]] && step gpu_test 400 "$B/gpu_test" --gtest_brief=1
if [[ $PART == bench || $PART == all ]]; then
  SPEC="$B/aerie-bench speculative --model-shape llama-3.1-8b --rounds 20 --draft-vocab 32000 --algorithm EAGLE3 --batch-size 1,8"
  for graphs in "" "--no-verify-graphs"; do
    tag=${graphs:+_eager}
    step tree8$tag 120 $SPEC --speculative-num-steps 3 --speculative-eagle-topk 4 --speculative-num-draft-tokens 8 $graphs \
      --json "$RESULTS/tree_graph_8b_s3k4n8${tag}.json"
    step tree32$tag 120 $SPEC --speculative-num-steps 5 --speculative-eagle-topk 8 --speculative-num-draft-tokens 32 $graphs \
      --json "$RESULTS/tree_graph_8b_s5k8n32${tag}.json"
  done
fi
[[ $PART == eval || $PART == all ]] && smollm2_eval eagle3_eval_h200_tree_graphs.json
pack_logs
exit $status
