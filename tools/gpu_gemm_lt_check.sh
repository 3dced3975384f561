#!/usr/bin/env bash
# On one H200 (device kind nvidia-h200), with .device.tgz from tools/device_pack.sh carried
# (BINS="launch/aerie-bench tests/gpu_test" is enough): products of 17-256 rows through cuBLASLt
# with the algorithm timed fastest per shape (kernels/cuda/matmul_lt.cuh) against cublasGemmEx
# (AERIE_GEMM_LT=0), the same binary in one call, interleaved so that drift shows.
#  - tests:  every gpu test (CudaOps.TunedCublasLtProductsMatchCpuAndTheirGraphs among them)
#  - decode: aerie-bench one-batch, 8B batch 1-256 and 1B batch 1-128 (graphs on, 512-token
#            prompts), once per SETTINGS entry name:AERIE_GEMM_LT: % of the HBM floor
# Results and logs go to $OUT/logs.tgz, the table to $OUT/summary.txt.
#   device run (carry [".device.tgz"]): bash tools/gpu_gemm_lt_check.sh [tests|decode|all]
set -uo pipefail
RESULTS=${OUT:-/tmp/aerie-gpu-gemm-lt}
source "$(dirname "$0")/gpu_steps.sh"
what=${1:-all}
SETTINGS=(${SETTINGS:-gemmex:0 lt:1 gemmex2:0 lt2:1})
if [[ $what == tests || $what == all ]]; then
  STEP_TAIL=6 step gpu_tests 300 "$B/gpu_test"
fi
if [[ $what == decode || $what == all ]]; then
  for s in "${SETTINGS[@]}"; do
    name=${s%%:*} knob=${s#*:}
    STEP_TAIL=2 step "decode_8b_$name" 240 env AERIE_GEMM_LT="$knob" "$B/aerie-bench" one-batch --load-format dummy --cuda-graph on \
      --model-shape llama-3.1-8b --batch-size 1,8,16,24,32,64,128,256 --input-len 512 --output-len 32 --json "$LOGS/decode_8b_$name.json"
    STEP_TAIL=2 step "decode_1b_$name" 120 env AERIE_GEMM_LT="$knob" "$B/aerie-bench" one-batch --load-format dummy --cuda-graph on \
      --model-shape llama-3.2-1b --batch-size 1,32,64,128 --input-len 512 --output-len 32 --json "$LOGS/decode_1b_$name.json"
  done
  python3 - "$LOGS" "${SETTINGS[@]}" <<'PY' | tee "$RESULTS/summary.txt"
import json, sys, os
logs, settings = sys.argv[1], [s.split(":")[0] for s in sys.argv[2:]]
for shape in ("8b", "1b"):
    print(f"== {shape}: decode ms (% of floor) per batch")
    for name in settings:
        path = os.path.join(logs, f"decode_{shape}_{name}.json")
        if not os.path.exists(path):
            print(f"{name:>8}: missing"); continue
        rows = json.load(open(path))["results"]
        print(f"{name:>8}: " + "  ".join(f"b{r['batch_size']} {r['decode_step_ms']:.3f} ({100 * r['fraction_of_floor']:.1f}%)" for r in rows))
PY
fi
pack_logs
exit $status
