#!/usr/bin/env bash
# On one H200 (device kind nvidia-h200), with .device.tgz from tools/device_pack.sh carried
# (BINS="launch/aerie-bench tests/gpu_test" is enough): products of 17-64 rows through the
# skinny tensor-core GEMM (kernels/cuda/ops_matmul_skinny.cu) against cuBLASLt tuned per shape
# (AERIE_GEMV_MAX_ROWS=16 hands those rows back to it), the same binary in one call.
#  - tests:   every gpu test (CudaOps.SkinnyGemmMatchesCpuFor17To64Rows among them)
#  - kernels: aerie-bench kernels, 8B shape, 17-64 rows: each product alone, skinny (/gemv)
#             against cuBLASLt (/cublas), once per KERNEL_SETTINGS entry
#             name:AERIE_GEMM_SKINNY_WARPS:AERIE_GEMM_SKINNY_SPLIT (0: the built-in choice)
#  - decode:  aerie-bench one-batch, 8B and 1B shapes, batch 24-64 (graphs on, 512-token
#             prompts), once per SETTINGS entry name:AERIE_GEMV_MAX_ROWS:AERIE_GEMM_SKINNY_WARPS,
#             interleaved: % of the HBM floor
# Results and logs go to $OUT/logs.tgz, the tables to $OUT/summary.txt.
#   device run (carry [".device.tgz"]): bash tools/gpu_skinny_gemm_check.sh [tests|kernels|decode|all]
# (each run replaces $OUT/logs.tgz: one run per device call, or `all`)
set -uo pipefail
RESULTS=${OUT:-/tmp/aerie-gpu-skinny}
source "$(dirname "$0")/gpu_steps.sh"
what=${1:-all}
SETTINGS=(${SETTINGS:-lt:16:8 skinny:64:8 lt2:16:8 skinny2:64:8})
KERNEL_SETTINGS=(${KERNEL_SETTINGS:-auto:0:0 w4:4:0 s1:0:1 s2:0:2 s4:0:4 s8:0:8})
if [[ $what == tests || $what == all ]]; then
  STEP_TAIL=6 step gpu_tests 300 "$B/gpu_test"
fi
if [[ $what == kernels || $what == all ]]; then
  for s in "${KERNEL_SETTINGS[@]}"; do
    IFS=: read -r name warps split <<<"$s"
    STEP_TAIL=1 step "kernels_8b_$name" 120 bash -c "env AERIE_GEMM_SKINNY_WARPS=$warps AERIE_GEMM_SKINNY_SPLIT=$split \
      '$B/aerie-bench' kernels --model-shape llama-3.1-8b --batch-size 17,32,64 --context 544 | grep -v 'attn' > '$LOGS/kernels_8b_$name.txt'"
  done
  for s in "${KERNEL_SETTINGS[@]}"; do
    name=${s%%:*}
    echo "== kernels $name" >>"$RESULTS/summary.txt"
    grep -E '^(qkv|o_proj|gate_up|down|lm_head)' "$LOGS/kernels_8b_$name.txt" >>"$RESULTS/summary.txt"
  done
fi
if [[ $what == decode || $what == all ]]; then
  for s in "${SETTINGS[@]}"; do
    IFS=: read -r name rows warps <<<"$s"
    STEP_TAIL=2 step "decode_8b_$name" 240 env AERIE_GEMV_MAX_ROWS="$rows" AERIE_GEMM_SKINNY_WARPS="$warps" "$B/aerie-bench" one-batch --load-format dummy --cuda-graph on \
      --model-shape llama-3.1-8b --batch-size 24,32,48,64 --input-len 512 --output-len 32 --json "$LOGS/decode_8b_$name.json"
    STEP_TAIL=2 step "decode_1b_$name" 120 env AERIE_GEMV_MAX_ROWS="$rows" AERIE_GEMM_SKINNY_WARPS="$warps" "$B/aerie-bench" one-batch --load-format dummy --cuda-graph on \
      --model-shape llama-3.2-1b --batch-size 32,64 --input-len 512 --output-len 32 --json "$LOGS/decode_1b_$name.json"
  done
  python3 - "$LOGS" "${SETTINGS[@]}" <<'PY' | tee -a "$RESULTS/summary.txt"
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
