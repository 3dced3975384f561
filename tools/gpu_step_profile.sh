#!/usr/bin/env bash
# On one H200 (device kind nvidia-h200), with .device.tgz from tools/device_pack.sh carried
# (BINS="launch/aerie-bench tests/gpu_test"): Nsight Compute's duration of every kernel of
#  - spec: an 8B-shape speculative round at batch 1 (EAGLE3 head of 32,000 draft tokens in fp8,
#          chain of 3 steps, the draft runner's graphs as served): the bench ends with a propose,
#          a verify and a draft extend taken apart, so the last kernels are exactly those
#  - decode: one graphed decode step at batch 1, 8B and 1B shapes (the last kernels of the run);
#    decode1b: the 1B shape only
#  - smollm2: SmolLM2-135M's shape at batch 1, a chain-5 round (EAGLE3 head of 16,384 draft tokens
#    in bf16, the shipped head's vocabulary; the draft runner's graphs, in-process) and a graphed
#    plain decode step
# each listed by tools/kernel_sequence.py into $OUT/<name>_kernels.txt (the raw CSV in logs.tgz).
# Clocks are not locked (--clock-control none), caches not flushed between kernels (--cache-control
# none, as a replayed graph runs them), and ncu runs kernels one at a time, so the sum of
# durations says what the kernels cost without the gaps between them.
#   device run (carry [".device.tgz"]): bash tools/gpu_step_profile.sh [spec|decode|decode1b|smollm2|all]
set -uo pipefail
RESULTS=${OUT:-/tmp/aerie-gpu-step-profile}
source "$(dirname "$0")/gpu_steps.sh"
what=${1:-all}
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
[[ -n $NCU ]] || { echo "no ncu on this machine"; exit 1; }
PROFILE=("$NCU" --clock-control none --cache-control none --metrics gpu__time_duration.sum,launch__grid_size,launch__block_size --csv --print-units base)
profile() {  # name, kernels to list, seconds, command...
  local name=$1 last=$2 secs=$3
  shift 3
  STEP_TAIL=2 step "ncu_$name" "$secs" "${PROFILE[@]}" "$@"
  python3 tools/kernel_sequence.py "$LOGS/ncu_$name.txt" --last "$last" > "$RESULTS/${name}_kernels.txt"
  tail -n 1 "$RESULTS/${name}_kernels.txt"
}
if [[ $what == spec || $what == all ]]; then
  profile spec_8b_fp8_chain3_b1 420 400 "$B/aerie-bench" speculative --rounds 3 --algorithm EAGLE3 --draft-chain runner \
    --speculative-draft-model-quantization fp8 --model-shape llama-3.1-8b --draft-vocab 32000 --batch-size 1 --speculative-num-steps 3
fi
if [[ $what == decode || $what == all || $what == decode1b ]]; then
  [[ $what == decode1b ]] || profile decode_8b_b1 320 300 "$B/aerie-bench" one-batch --load-format dummy --cuda-graph on --model-shape llama-3.1-8b \
    --batch-size 1 --input-len 512 --output-len 4
  profile decode_1b_b1 180 200 "$B/aerie-bench" one-batch --load-format dummy --cuda-graph on --model-shape llama-3.2-1b \
    --batch-size 1 --input-len 512 --output-len 4
fi
if [[ $what == smollm2 || $what == all ]]; then
  profile spec_smollm2_chain5_b1 700 300 "$B/aerie-bench" speculative --rounds 3 --algorithm EAGLE3 --draft-chain runner --no-draft-actor \
    --model-shape smollm2-135m --draft-vocab 16384 --batch-size 1 --speculative-num-steps 5
  profile decode_smollm2_b1 400 200 "$B/aerie-bench" one-batch --load-format dummy --cuda-graph on --model-shape smollm2-135m \
    --batch-size 1 --input-len 512 --output-len 4
fi
pack_logs
exit $status
