#!/usr/bin/env bash
# On the GPU machine (device tool), with .device/ from tools/device_pack.sh carried along:
# the GPU tests (speculative greedy equality included) and `aerie-bench speculative` at the
# Llama-3.1-8B shape (random weights; EAGLE3 and EAGLE heads, STANDALONE self-draft),
# batch 1, 8 and 32, 3 and 7 draft steps. Logs and JSON go to $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/aerie-gpu-spec}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH=$PWD/.device/lib:${LD_LIBRARY_PATH:-}
B=$PWD/.device/bin
status=0
nvidia-smi --query-gpu=name,memory.total --format=csv
"$B/gpu_test" --gtest_brief=1 2>&1 | tee "$OUT/gpu_test.log" | tail -n 20
[[ ${PIPESTATUS[0]} -eq 0 ]] || { echo "gpu_test FAILED"; status=1; }
"$B/aerie-bench" speculative --model-shape llama-3.1-8b --batch-size 1,8,32 --speculative-num-steps 3 \
  --json "$OUT/spec_8b_steps3.json" 2>&1 | tee "$OUT/spec_8b_steps3.txt" || status=1
"$B/aerie-bench" speculative --model-shape llama-3.1-8b --batch-size 1,8 --speculative-num-steps 7 \
  --json "$OUT/spec_8b_steps7.json" 2>&1 | tee "$OUT/spec_8b_steps7.txt" || status=1
exit $status
