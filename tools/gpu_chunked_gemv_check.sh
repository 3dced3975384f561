#!/usr/bin/env bash
# The chunked tensor-core GEMV against cuBLASLt for 17-256 rows (kernels/gemv_rules.hpp: which
# products of more than 16 rows take it), in one device call with .device.tgz (gpu_test,
# aerie-bench) carried: gpu_test first (every CUDA op against the CPU reference), then
# `aerie-bench kernels` at SmolLM2-135M's and Llama-3.2-1B's shapes, each product both ways
# ("/chunks", "/cublas") with its weights rotated through more than L2 holds.
#   device run (carry [".device.tgz"]): bash tools/gpu_chunked_gemv_check.sh
# SHAPES, BATCHES change the sweep. Output in $OUT/*.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/aerie-chunked-gemv}
mkdir -p "$OUT"
rm -rf .device && tar xzf .device.tgz && touch .device
export LD_LIBRARY_PATH=$PWD/.device/lib:${LD_LIBRARY_PATH:-}
status=0
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
timeout 300 .device/bin/gpu_test --gtest_brief=1 > "$OUT/gpu_test.txt" 2>&1 || status=1
grep -E "^\[  (PASSED|FAILED) |FAILED \]" "$OUT/gpu_test.txt" | head -20
for shape in ${SHAPES:-smollm2-135m llama-3.2-1b}; do
  timeout 200 .device/bin/aerie-bench kernels --model-shape "$shape" --batch-size "${BATCHES:-17,24,32,40,48,64,96,128,256}" \
    > "$OUT/kernels_$shape.txt" 2>&1 || status=1
  echo "== $shape (us: chunks / cublas)"
  grep -E "/(chunks|cublas)" "$OUT/kernels_$shape.txt" | awk '{split($1, a, "/"); key = a[1] " " $2; if (a[2] == "chunks") c[key] = $3; else printf "%-10s %5s %9s %9s %6.2fx\n", a[1], $2, c[key], $3, $3 / c[key]}'
done
exit $status
