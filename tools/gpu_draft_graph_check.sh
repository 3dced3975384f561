#!/usr/bin/env bash
# On one H200 (device kind nvidia-h200), with .device.tgz from tools/device_pack.sh carried:
# the GPU tests (the draft chain's graphs against step-by-step drafting for every bucket,
# speculative greedy equality through the engine, which now drafts chains through the
# graphs), then `aerie-bench speculative` at the Llama-3.1-8B shape with an EAGLE3 head of
# 32,000 draft tokens: chains of 3 and 5 steps at batch 1, 8 and 32 with the draft chain as
# one graph ("+graph") and step by step, same run, and a tree (topk 4, 8 tokens) at batch
# 1 and 8; plain decode steps are each row's baseline.
#   device run (carry [".device.tgz"]): bash tools/gpu_draft_graph_check.sh [tests|bench|all]
# (tests and bench fit one device call each.)
set -uo pipefail
PART=${1:-all}
RESULTS=${OUT:-/tmp/aerie-gpu-draft-graphs}
source "$(dirname "$0")/gpu_steps.sh"
[[ $PART == bench ]] || step gpu_test 300 "$B/gpu_test" --gtest_brief=1
[[ $PART == tests ]] && { pack_logs; exit $status; }
SPEC="$B/aerie-bench speculative --model-shape llama-3.1-8b --rounds 20 --draft-vocab 32000 --algorithm EAGLE3"
step chain3 150 $SPEC --batch-size 1,8,32 --speculative-num-steps 3 --draft-chain both --json "$LOGS/draft_graph_8b_chain3.json"
step chain5 150 $SPEC --batch-size 1,8,32 --speculative-num-steps 5 --draft-chain both --json "$LOGS/draft_graph_8b_chain5.json"
step tree_s3k4n8 90 $SPEC --batch-size 1,8 --speculative-num-steps 3 --speculative-eagle-topk 4 --speculative-num-draft-tokens 8 \
  --json "$LOGS/draft_graph_8b_tree_s3k4n8.json"
step standalone3 120 "$B/aerie-bench" speculative --model-shape llama-3.2-1b --rounds 20 --algorithm STANDALONE --batch-size 1,8 \
  --speculative-num-steps 3 --draft-chain both --json "$LOGS/draft_graph_1b_standalone3.json"
pack_logs
exit $status
