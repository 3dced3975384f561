#!/usr/bin/env bash
# On one H200 (device kind nvidia-h200), with .device.tgz from tools/device_pack.sh carried
# (BINS="launch/aerie-bench tests/gpu_test" is enough): the L2 prefetch hints
# (kernels/l2_prefetch.hpp: attention asks L2 for o_proj's weights, each norm for the head of
# the product after it) against the same binary without them, in one call.
#  - tests:  every gpu test
#  - decode: aerie-bench one-batch, 8B batch 1/8/16/32 and 1B batch 1/8/32 (graphs on,
#            512-token prompts), once per SETTINGS entry
#            name:AERIE_L2_PREFETCH:AERIE_L2_PREFETCH_MB:AERIE_L2_PREFETCH_SITES (0 off, 1 bulk
#            prefetch, 2 line prefetches; MB 0 = three quarters of L2; sites 1 attention, 2 norms),
#            interleaved so that drift shows: % of the HBM floor
# Results and logs go to $OUT/logs.tgz.
#   device run (carry [".device.tgz"]): bash tools/gpu_l2_prefetch_check.sh [tests|decode|all]
set -uo pipefail
RESULTS=${OUT:-/tmp/aerie-gpu-l2-prefetch}
source "$(dirname "$0")/gpu_steps.sh"
what=${1:-all}
SETTINGS=(${SETTINGS:-off:0:0:3 bulk:1:0:3 lines:2:0:3 attn:1:0:1 norms:1:0:2 off2:0:0:3 bulk2:1:0:3 bulk16mb:1:16:3})
if [[ $what == tests || $what == all ]]; then
  STEP_TAIL=6 step gpu_tests 300 "$B/gpu_test"
fi
if [[ $what == decode || $what == all ]]; then
  for s in "${SETTINGS[@]}"; do
    IFS=: read -r name mode mb sites <<< "$s"
    knobs=(AERIE_L2_PREFETCH="$mode" AERIE_L2_PREFETCH_MB="$mb" AERIE_L2_PREFETCH_SITES="$sites")
    STEP_TAIL=4 step "decode_8b_$name" 200 env "${knobs[@]}" "$B/aerie-bench" one-batch --load-format dummy --cuda-graph on \
      --model-shape llama-3.1-8b --batch-size 1,8,16,32 --input-len 512 --output-len 32 --json "$LOGS/decode_8b_$name.json"
    STEP_TAIL=3 step "decode_1b_$name" 120 env "${knobs[@]}" "$B/aerie-bench" one-batch --load-format dummy --cuda-graph on \
      --model-shape llama-3.2-1b --batch-size 1,8,32 --input-len 512 --output-len 32 --json "$LOGS/decode_1b_$name.json"
  done
  python3 - "$LOGS" "${SETTINGS[@]}" <<'PY' | tee "$RESULTS/summary.txt"
import json, sys, os
logs, settings = sys.argv[1], [s.split(":")[0] for s in sys.argv[2:]]
for shape in ("8b", "1b"):
    print(f"== {shape}: decode ms (% of floor) per batch")
    for name in settings:
        path = os.path.join(logs, f"decode_{shape}_{name}.json")
        if not os.path.exists(path):
            print(f"{name:>10}: missing"); continue
        rows = json.load(open(path))
        rows = rows.get("results", rows) if isinstance(rows, dict) else rows
        cells = [f"b{r['batch_size']} {r['decode_step_ms']:.3f} ({100 * r['fraction_of_floor']:.1f}%)" for r in rows]
        print(f"{name:>10}: " + "  ".join(cells))
PY
fi
pack_logs
exit $status
