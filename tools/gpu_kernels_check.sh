#!/usr/bin/env bash
# On one H200 (device kind nvidia-h200), with .device.tgz from tools/device_pack.sh carried:
# issue #21's measurements in one call, Aerie and its peer minutes apart.
#  - tests: every gpu test (CUDA ops against the CPU, the tensor-core prefill attention among them)
#  - prefill: aerie-bench one-batch, 8B shape, 512- and 4096-token prompts, prefill attention on
#    the tensor cores and (AERIE_ATTN_PREFILL_TC=-1) the previous kernel; MFU against the
#    dense matmul rate measured in the same process
#  - decode: 8B batch 1/8/32/128/256 and 1B batch 1 with graphs, % of the HBM floor
#  - peer: tools/bench_torch_compiled.py (gpt-fast-style, torch.compile reduce-overhead), same shapes
#   device run (carry [".device.tgz"]): bash tools/gpu_kernels_check.sh [tests|prefill|decode|peer|all]
set -uo pipefail
RESULTS=${OUT:-/tmp/aerie-gpu-kernels}
source "$(dirname "$0")/gpu_steps.sh"
what=${1:-all}
ONE=("$B/aerie-bench" one-batch --load-format dummy --cuda-graph on)
if [[ $what == tests || $what == all ]]; then
  STEP_TAIL=6 step gpu_tests 300 "$B/gpu_test"
fi
if [[ $what == prefill || $what == all ]]; then
  for len in 512 4096; do
    STEP_TAIL=6 step "prefill_${len}_tc" 240 "${ONE[@]}" --model-shape llama-3.1-8b --batch-size 1 --input-len $len --output-len 4 \
      --json "$RESULTS/prefill_${len}_tc.json"
    STEP_TAIL=6 step "prefill_${len}_old" 240 env AERIE_ATTN_PREFILL_TC=-1 "${ONE[@]}" --model-shape llama-3.1-8b --batch-size 1 \
      --input-len $len --output-len 4 --json "$RESULTS/prefill_${len}_old.json"
  done
fi
if [[ $what == decode || $what == all ]]; then
  STEP_TAIL=10 step decode_8b 300 "${ONE[@]}" --model-shape llama-3.1-8b --batch-size 1,8,32,128,256 --input-len 512 --output-len 32 \
    --json "$RESULTS/decode_8b.json"
  STEP_TAIL=6 step decode_1b 120 "${ONE[@]}" --model-shape llama-3.2-1b --batch-size 1 --input-len 512 --output-len 32 \
    --json "$RESULTS/decode_1b.json"
fi
if [[ $what == peer || $what == all ]]; then
  STEP_TAIL=4 step peer_8b 420 python3 tools/bench_torch_compiled.py --model-shape llama-3.1-8b --batch-size 1 32 --input-len 512 --output-len 32
  cp "$LOGS/peer_8b.txt" "$RESULTS/peer_8b.txt"
  STEP_TAIL=4 step peer_1b 200 python3 tools/bench_torch_compiled.py --model-shape llama-3.2-1b --batch-size 1 --input-len 512 --output-len 32
  cp "$LOGS/peer_1b.txt" "$RESULTS/peer_1b.txt"
fi
pack_logs
exit $status
