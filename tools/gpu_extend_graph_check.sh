#!/usr/bin/env bash
# On one H200 (device kind nvidia-h200), with .device.tgz from tools/device_pack.sh carried:
# the draft extend after a chain verify as a CUDA graph per bucket (issue #14 item 3).
#   tests: every gpu test (CudaDraftExtend.GraphsLeaveTheStateOfTheEagerExtend, and the
#          speculative equality tests, whose chain verifies now extend through the graphs).
#   bench: aerie-bench speculative, Llama-3.1-8B shape, EAGLE3 head of 32,000 draft tokens,
#          chains of 3 and 5 steps at batch 1/8/32 ("+graph": the chain runner with the
#          extend graph, as served; without: drafting step by step and the eager extend).
#   eval:  SmolLM2 with the trained head, when .device_model/ holds the GGUF's parts.
#   device run (carry [".device.tgz"]): bash tools/gpu_extend_graph_check.sh [tests|bench|eval|all]
set -uo pipefail
PART=${1:-all}
RESULTS=${OUT:-/tmp/aerie-gpu-extend-graphs}
source "$(dirname "$0")/gpu_steps.sh"
[[ $PART == tests || $PART == all ]] && step gpu_test 400 "$B/gpu_test" --gtest_brief=1
if [[ $PART == bench || $PART == all ]]; then
  SPEC="$B/aerie-bench speculative --model-shape llama-3.1-8b --rounds 20 --draft-vocab 32000 --algorithm EAGLE3 --batch-size 1,8,32"
  step chain3 150 $SPEC --speculative-num-steps 3 --draft-chain both --json "$RESULTS/extend_graph_8b_chain3.json"
  step chain5 150 $SPEC --speculative-num-steps 5 --draft-chain both --json "$RESULTS/extend_graph_8b_chain5.json"
fi
[[ $PART == eval || $PART == all ]] && smollm2_eval eagle3_eval_h200_extend_graphs.json
pack_logs
exit $status
