#!/usr/bin/env bash
# On the GPU machine (device tool), with .device/ from tools/device_pack.sh carried along:
# GPU tests, the one-batch benchmark (Llama-3.1-8B and 3.2-1B shapes, dummy weights), and
# transformers parity on the GPU. Logs and JSON go to $OUT.
#   device run: bash tools/gpu_check.sh [tests|bench|parity ...]   (default: all three)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/aerie-gpu-check}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
[[ -d .device ]] || tar xzf .device.tgz  # tools/device_pack.sh
export LD_LIBRARY_PATH=$PWD/.device/lib:${LD_LIBRARY_PATH:-}
B=$PWD/.device/bin
steps=${*:-tests bench parity}
status=0
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,clocks.max.mem --format=csv
for step in $steps; do
  case $step in
    tests)
      for t in gpu_test; do
        "$B/$t" --gtest_brief=1 2>&1 | tee "$OUT/$t.log" | tail -n 30 || status=1
        [[ ${PIPESTATUS[0]} -eq 0 ]] || { echo "$t FAILED"; status=1; }
      done;;
    bench)
      "$B/aerie-bench" kernels --model-shape llama-3.1-8b --batch-size 1,8,32,128 --context 544 2>&1 | tee "$OUT/kernels_llama-3.1-8b.txt" || status=1
      for shape in llama-3.1-8b llama-3.2-1b; do
        "$B/aerie-bench" one-batch --load-format dummy --model-shape $shape --batch-size 1,8,32,128 \
          --input-len 512 --output-len 32 --cuda-graph both --json "$OUT/bench_$shape.json" 2>&1 | tee "$OUT/bench_$shape.txt" || status=1
      done;;
    parity)
      python3 tests/fidelity/gpu_parity.py --generate "$B/aerie-generate" --dump-logits "$B/aerie-dump-logits" \
        --out "$OUT/parity.json" 2>&1 | grep -v -i -E "warn|Loading weights|Writing" | tee "$OUT/parity.txt"
      [[ ${PIPESTATUS[0]} -eq 0 ]] || status=1;;
  esac
done
exit $status
