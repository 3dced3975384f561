#!/usr/bin/env bash
# --enable-deterministic-inference on the GPU (docs/deterministic-inference.md), in one device call
# with .device.tgz (aerie-generate, gpu_test) and the GGUF's parts already on the machine
# (tools/device_model_gguf.sh says how they travel) and the shipped head in assets/:
#   1. gpu_test's batch-invariant tests and the bf16 bit-for-bit verify test;
#   2. #19's greedy table (96 held-out prompts x 128 tokens, batches 1 and 8, chains of 3-5 steps
#      and the tree) with the flag, without it, and without it and without the chunked GEMV
#      (AERIE_GEMV_CHUNKED_MAX_ROWS=0): speedups, accept lengths and how many greedy answers equal
#      plain decoding's (with the flag: every chain answer at every batch);
#   3. where the time goes at batch 8 in each mode (--graph-times: each graph runner's and the
#      eager forwards' device time, runs x ms a run).
#   device run (carry the last GGUF part; assets/ in the tree): bash tools/gpu_deterministic_check.sh
# PROMPTS, CONFIGS, BATCHES change step 2, MODES steps 2-3. Tables in $OUT/*.txt, the runs' JSON in $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/aerie-deterministic}
mkdir -p "$OUT"
rm -rf .device && tar xzf .device.tgz
export LD_LIBRARY_PATH=$PWD/.device/lib:${LD_LIBRARY_PATH:-}
bash tools/device_model_gguf.sh || exit 1
status=0
timeout 300 .device/bin/gpu_test --gtest_filter='CudaBatchInvariant.*:CudaModel.Bf16*' > "$OUT/gpu_test_batch_invariant.txt" 2>&1 || status=1
grep -E "^\[  (PASSED|FAILED) |OK \]|FAILED \]|differ" "$OUT/gpu_test_batch_invariant.txt" | head -30
H=$PWD/assets/smollm2-eagle3
# default: this build's policies; no-chunks: 17-64 rows of small weights on cuBLASLt again (the
# chunked GEMV's rule off); deterministic: --enable-deterministic-inference.
run_mode() {  # mode, eval_spec configs, batches, name, extra flags
  local env_knobs="X=1" flags=$5
  [[ $1 == no-chunks ]] && env_knobs="AERIE_GEMV_CHUNKED_MAX_ROWS=0"
  [[ $1 == deterministic ]] && flags="$flags --enable-deterministic-inference"
  env $env_knobs OUT=$OUT HEAD=$H PROMPTS=${PROMPTS:-96} BATCHES="$3" TEMPS=0 CONFIGS="$2" NAME=$4 EXTRA="$flags" bash tools/gpu_eagle3_eval.sh 2>&1
}
for mode in ${MODES:-default no-chunks deterministic}; do
  echo "== $mode"
  run_mode $mode "${CONFIGS:-plain chain-3 chain-4 chain-5 tree-4x5-8}" "${BATCHES:-1 8}" eagle3_eval_$mode "" \
    | grep -vE "^(loading|making)" | tee "$OUT/table_$mode.txt" || status=1
done
for mode in ${MODES:-default no-chunks deterministic}; do
  echo "== $mode, batch 8, --graph-times"
  run_mode $mode "plain chain-4" 8 graph_times_$mode --graph-times | grep "^batch" || status=1
  python3 - "$OUT/graph_times_$mode.json" <<'PY' | tee "$OUT/graph_times_$mode.txt"
import json, sys
for row in json.load(open(sys.argv[1]))["rows"]:
    times = row.get("graph_ms_a_run", {})
    total = sum(v["runs"] * v["ms"] for v in times.values())
    print(f"{row['config']}: {row['tok_per_s']:.0f} tok/s, device {total:.0f} ms in forwards")
    for label, v in sorted(times.items(), key=lambda kv: -kv[1]["runs"] * kv[1]["ms"]):
        print(f"  {label:40s} {v['runs']:6d} runs x {v['ms']:.4f} ms = {v['runs'] * v['ms']:8.1f} ms")
PY
done
exit $status
