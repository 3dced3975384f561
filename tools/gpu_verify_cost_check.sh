#!/usr/bin/env bash
# On one H200 (device kind nvidia-h200), with .device.tgz from
# BUILD_DIR=build BINS="launch/aerie-bench tests/gpu_test" bash tools/device_pack.sh carried:
# what a speculative round's device time is made of at SmolLM2-135M's shape (random weights, an
# EAGLE-3 head over the shipped head's 16,384 draft tokens, chain of 5, batch 1, in-process draft),
# under each setting of $SETTINGS (environment assignments, "default" for none), two rounds
# interleaved: the device's time in each runner's graph a round (aerie-bench speculative's
# `round_graph_ms`: verify, draft chain, draft extend), what the round spent outside them, and a
# plain step's decode graph. First gpu_test's GEMV, attention, model and speculative tests under
# each setting of $TEST_SETTINGS (default: $SETTINGS). Several assignments in one setting: A=1,B=2.
#   device run (carry [".device.tgz"]): SETTINGS="default AERIE_GEMV_MMA_NARROW_WARPS=16" bash tools/gpu_verify_cost_check.sh
set -uo pipefail
RESULTS=${OUT:-/tmp/aerie-gpu-verify-cost}
source "$(dirname "$0")/gpu_steps.sh"
SETTINGS=${SETTINGS:-default}
BATCH=${BATCH:-1}
STEPS=${STEPS:-5}
for s in ${TEST_SETTINGS-$SETTINGS}; do
  env=()
  [[ $s == default ]] || env=(${s//,/ })
  STEP_TAIL=3 step "gpu_test_$s" 300 env ${env[@]+"${env[@]}"} "$B/gpu_test" --gtest_filter='*Gemv*:*Matmul*:*Attention*:CudaModel.*:CudaSpeculative.Greedy*'
done
for round in 1 2; do
  for s in $SETTINGS; do
    env=()
    [[ $s == default ]] || env=(${s//,/ })
    STEP_TAIL=2 step "bench_${s}_$round" 240 env ${env[@]+"${env[@]}"} "$B/aerie-bench" "${SMOLLM2_SPEC_ROUND[@]}" --batch-size "$BATCH" \
      --speculative-num-steps "$STEPS" --json "$LOGS/bench_${s}_$round.json"
  done
done
python3 - "$LOGS" "$SETTINGS" <<'PY' | tee "$RESULTS/verify_cost.txt"
import json, os, sys
logs, settings = sys.argv[1], sys.argv[2].split()
print("ms a round or step, rounds 1 / 2 (random weights: one token a round)")
for s in settings:
    rows = []
    for r in (1, 2):
        f = os.path.join(logs, f"bench_{s}_{r}.json")
        if os.path.exists(f):
            rows.append(next(d for d in json.load(open(f)) if d["draft_runner"]))
    if not rows:
        continue
    def col(get):
        return " / ".join(f"{get(d):.3f}" for d in rows)
    g = lambda d, k: d["round_graph_ms"].get(k, 0.0)
    print(f"{s}\n    round {col(lambda d: d['round_ms'])} | verify {col(lambda d: g(d, 'verify'))} | chain {col(lambda d: g(d, 'draft chain'))} | "
          f"extend {col(lambda d: g(d, 'draft extend'))} | outside {col(lambda d: d['round_outside_graphs_ms'])} | plain {col(lambda d: d['plain_step_ms'])} "
          f"| plain graph {col(lambda d: d['plain_graph_ms'].get('decode', 0.0))} | round / plain {col(lambda d: d['round_ms'] / d['plain_step_ms'])}")
PY
pack_logs
exit $status
