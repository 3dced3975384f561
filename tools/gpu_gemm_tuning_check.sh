#!/usr/bin/env bash
# cuBLASLt tuning shared by row-count bucket against tuning every row count (kernels/gemm_tuning.hpp),
# one device call: gpu_test's tuned-product tests, then `aerie-bench gemm-tuning` for the 8B and 1B
# shapes at every row count from 17 to 256 (random order) in both modes, each in its own process
# (a process tunes a shape once), and a summary: what the first calls cost, and how much slower (or
# faster) each row count's product runs soon afterwards with its bucket's algorithm and once it has
# recurred (AERIE_GEMM_LT_RETUNE_AFTER calls: the borrowed algorithm retimed for the row count).
# Carry .device.tgz from: BUILD_DIR=build BINS="launch/aerie-bench tests/gpu_test" bash tools/device_pack.sh
#   device run: bash tools/gpu_gemm_tuning_check.sh      (SHAPES, default "llama-3.1-8b llama-3.2-1b";
#   GPU_TEST_FILTER, default the tuned-product tests; "*" runs all of gpu_test first)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/aerie-gemm-tuning}
mkdir -p "$OUT"
: > "$OUT/tuning.log"  # the tables of every run (the device tool brings back 8 files)
[[ -d .device && .device -nt .device.tgz ]] || { rm -rf .device && tar xzf .device.tgz && touch .device; }
export LD_LIBRARY_PATH=$PWD/.device/lib:${LD_LIBRARY_PATH:-}
B=$PWD/.device/bin
status=0
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/gpu.txt"
if [[ -x $B/gpu_test ]]; then
  "$B/gpu_test" --gtest_brief=1 --gtest_filter="${GPU_TEST_FILTER:-CudaOps.Tuned*:CudaOps.Matmul*}" > "$OUT/gpu_test.log" 2>&1 || { echo "gpu_test FAILED"; status=1; }
  tail -n 3 "$OUT/gpu_test.log"
fi
for shape in ${SHAPES:-llama-3.1-8b llama-3.2-1b}; do
  for mode in buckets exact; do
    env $([[ $mode == exact ]] && echo AERIE_GEMM_LT_BUCKETS=0) "$B/aerie-bench" gemm-tuning --model-shape "$shape" \
      --json "$OUT/tuning_${shape}_$mode.json" 2>&1 | tee -a "$OUT/tuning.log" || status=1
  done
done
python3 - "$OUT" ${SHAPES:-llama-3.1-8b llama-3.2-1b} <<'PY' | tee "$OUT/summary.txt"
import json, os, sys
out = sys.argv[1]
for shape in sys.argv[2:]:
    runs = {}
    for mode in ("buckets", "exact"):
        p = os.path.join(out, f"tuning_{shape}_{mode}.json")
        if os.path.exists(p):
            runs[mode] = {r["op"]: r for r in json.load(open(p))["results"]}
    if len(runs) < 2:
        print(f"{shape}: a mode is missing"); continue
    print(f"{shape}: first calls of rows 17-256 (ms, shapes timed); then each row count's time with the bucket shared / "
          f"tuned per row count (median, worst over row counts): soon after (borrowed algorithms) and settled "
          f"(after {json.load(open(os.path.join(out, f'tuning_{shape}_buckets.json'))).get('retune_after', '?')} calls: borrowed ones retimed)")
    for op, b in runs["buckets"].items():
        e = runs["exact"][op]
        own = {r["rows"]: r["settled_ms"] for r in e["rows"]}  # the exact mode's settled times: warmest
        def ratio(key):
            rs = sorted(r[key] / own[r["rows"]] for r in b["rows"] if own.get(r["rows"]))
            return f"x{rs[len(rs) // 2]:.3f} median, x{rs[-1]:.3f} worst"
        print(f"  {op:<8} first calls {b['first_calls_ms']:7.1f} vs {e['first_calls_ms']:7.1f} ms ({b['timed']} vs {e['timed']} timed)"
              f"   soon after {ratio('steady_ms')}   settled ({b['retuned']} retimed) {ratio('settled_ms')}"
              f"   sums {1e3 * b['settled_sum_ms']:.0f} vs {1e3 * e['settled_sum_ms']:.0f} us")
PY
exit $status
