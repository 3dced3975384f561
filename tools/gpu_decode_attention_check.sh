#!/usr/bin/env bash
# On one H200 (device kind nvidia-h200), with .device.tgz from tools/device_pack.sh carried
# (BINS="launch/aerie-bench tests/gpu_test" is enough): the tensor-core decode attention
# (kernels/cuda/ops_attention_decode.cu), the split policy and the 9-16-row GEMV against the
# engine without them, in one call.
#  - tests:   every gpu test (CudaOps.DecodeAttentionOnTensorCoresMatchesCpu among them)
#  - kernels: aerie-bench kernels, 8B shape, context 544, batch 1/8/32/128/256, once per
#             KERNEL_SETTINGS entry name:AERIE_ATTN_DECODE_TC (default: off -1, auto 0, forced 1)
#  - decode:  aerie-bench one-batch, 8B batch 1-256 and 1B batch 1/32 (graphs on, 512-token
#             prompts), once per DECODE_SETTINGS entry (below): % of the HBM floor
# Results and logs go to $OUT/logs.tgz (one file: the device tool brings back only a few).
#   device run (carry [".device.tgz"]): bash tools/gpu_decode_attention_check.sh [tests|kernels|decode|all]
set -uo pipefail
RESULTS=${OUT:-/tmp/aerie-gpu-decode-attention}
source "$(dirname "$0")/gpu_steps.sh"
what=${1:-all}
SETTINGS=(${KERNEL_SETTINGS:-off:-1 auto:0 forced:1})
if [[ $what == tests || $what == all ]]; then
  STEP_TAIL=6 step gpu_tests 300 "$B/gpu_test"
fi
if [[ $what == kernels || $what == all ]]; then
  for s in "${SETTINGS[@]}"; do
    name=${s%%:*} knob=${s#*:}
    STEP_TAIL=0 step "kernels_8b_$name" 180 env AERIE_ATTN_DECODE_TC="$knob" "$B/aerie-bench" kernels --model-shape llama-3.1-8b \
      --batch-size 1,8,32,128,256 --context 544
    grep -E "^(op|attention|attn_verify|qkv|o_proj|gate_up|down)" "$LOGS/kernels_8b_$name.txt" > "$RESULTS/kernels_8b_$name.txt"
  done
fi
# decode settings: name:AERIE_ATTN_DECODE_TC:AERIE_ATTN_BLOCKS_PER_SM:AERIE_GEMV_MAX_ROWS (0 blocks: the
# planner's policy; no rows: the built-in default). "before" is the engine without this
# change (CUDA-core attention, 8 blocks per SM, GEMVs up to 8 rows).
DECODE_SETTINGS=(${DECODE_SETTINGS:-before:-1:8:8 attention:0:0:8 now:0:0:})
if [[ $what == decode || $what == all ]]; then
  for s in "${DECODE_SETTINGS[@]}"; do
    IFS=: read -r name knob blocks rows <<< "$s"
    knobs=(AERIE_ATTN_DECODE_TC="$knob" AERIE_ATTN_BLOCKS_PER_SM="$blocks" ${rows:+AERIE_GEMV_MAX_ROWS=$rows})
    STEP_TAIL=7 step "decode_8b_$name" 300 env "${knobs[@]}" "$B/aerie-bench" one-batch --load-format dummy --cuda-graph on \
      --model-shape llama-3.1-8b --batch-size 1,8,16,32,64,128,256 --input-len 512 --output-len 32 --json "$LOGS/decode_8b_$name.json"
    STEP_TAIL=1 step "decode_1b_$name" 120 env "${knobs[@]}" "$B/aerie-bench" one-batch --load-format dummy --cuda-graph on \
      --model-shape llama-3.2-1b --batch-size 1,32 --input-len 512 --output-len 32 --json "$LOGS/decode_1b_$name.json"
  done
fi
pack_logs
exit $status
