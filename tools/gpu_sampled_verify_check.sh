#!/usr/bin/env bash
# On one H200 (device kind nvidia-h200), with .device.tgz from tools/device_pack.sh carried:
# sampled verification on the device (kernels::tree_accept, issue #14 item 4).
#   tests: the gpu tests of acceptance and speculation (device walk against the CPU walk, the
#          first token's chi-square, seeded sampled runs that repeat, greedy equality).
#   bench: aerie-bench speculative, Llama-3.1-8B shape, EAGLE3 head of 32,000 draft tokens,
#          chain of 3 steps at batch 1/8/32 and a tree (topk 4, 8 tokens) at batch 1/8, each at
#          temperature 0 and 0.7 in the same run (random weights: the cost of a round).
#   eval:  SmolLM2 with the trained head (assets/smollm2-eagle3) at temperature 0 and 0.7,
#          when .device_model/ holds the GGUF's parts (tools/gpu_smollm2_bench.sh says how).
#   device run (carry [".device.tgz"]): bash tools/gpu_sampled_verify_check.sh [tests|bench|eval|all]
set -uo pipefail
PART=${1:-all}
RESULTS=${OUT:-/tmp/aerie-gpu-sampled}
source "$(dirname "$0")/gpu_steps.sh"
if [[ $PART == tests || $PART == all ]]; then
  step gpu_test_spec 300 "$B/gpu_test" --gtest_brief=1 --gtest_filter='CudaTreeAccept.*:CudaSpeculative.*:CudaOps.*Sampl*:CudaOps.GreedyTopK*'
fi
if [[ $PART == bench || $PART == all ]]; then
  SPEC="$B/aerie-bench speculative --model-shape llama-3.1-8b --rounds 20 --draft-vocab 32000 --algorithm EAGLE3 --draft-chain runner"
  for T in 0 0.7; do
    step chain3_t$T 150 $SPEC --batch-size 1,8,32 --speculative-num-steps 3 --temperature $T --json "$RESULTS/sampled_8b_chain3_t$T.json"
    step tree_t$T 120 $SPEC --batch-size 1,8 --speculative-num-steps 3 --speculative-eagle-topk 4 --speculative-num-draft-tokens 8 \
      --temperature $T --json "$RESULTS/sampled_8b_tree_t$T.json"
  done
fi
[[ $PART == eval || $PART == all ]] && smollm2_eval eagle3_eval_h200_device_accept.json
pack_logs
exit $status
