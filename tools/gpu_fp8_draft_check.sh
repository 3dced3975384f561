#!/usr/bin/env bash
# On one H200 (device kind nvidia-h200), with .device.tgz from tools/device_pack.sh carried
# (BINS="launch/aerie-bench tests/gpu_test"): the EAGLE head with FP8 weights
# (--speculative-draft-model-quantization fp8, issue #14's propose goal).
#   tests: every gpu test (CudaOps.Fp8WeightsMatchCpu: the fp8 GEMVs and tiles against the CPU).
#   bench: aerie-bench speculative, Llama-3.1-8B shape, EAGLE3 head of 32,000 draft tokens, the
#          draft runner as served, the head as loaded (bf16) and in fp8 in the same run: chains
#          of 3 and 5 steps at batch 1/8/32, a tree (topk 4, 3 steps, 8 tokens) at batch 1/8;
#          SmolLM2's shape, chain 3, batch 1/8.
#   repeat: chain 3 at batch 1, three more runs (the spread of the batch-1 goal's figures).
#   rows: chain 3 at batch 1 with each weight-rows-per-block setting of the one-row fp8 GEMV
#         (AERIE_GEMV_FP8_ROWS in FP8_ROWS, default "1 2 4 16"), interleaved over ROUNDS rounds
#         (default 2); the table in $OUT/fp8_rows_ab.txt.
#   device run (carry [".device.tgz"]): bash tools/gpu_fp8_draft_check.sh [tests|bench|repeat|rows|all]
set -uo pipefail
PART=${1:-all}
RESULTS=${OUT:-/tmp/aerie-gpu-fp8-draft}
source "$(dirname "$0")/gpu_steps.sh"
[[ $PART == tests || $PART == all ]] && step gpu_test 420 "$B/gpu_test" --gtest_brief=1
if [[ $PART == bench || $PART == all ]]; then
  SPEC="$B/aerie-bench speculative --rounds 20 --algorithm EAGLE3 --draft-chain runner --speculative-draft-model-quantization none fp8"
  step chain3 150 $SPEC --model-shape llama-3.1-8b --draft-vocab 32000 --batch-size 1,8,32 --speculative-num-steps 3 --json "$RESULTS/fp8_draft_8b_chain3.json"
  step chain5 150 $SPEC --model-shape llama-3.1-8b --draft-vocab 32000 --batch-size 1,8,32 --speculative-num-steps 5 --json "$RESULTS/fp8_draft_8b_chain5.json"
  step tree 150 $SPEC --model-shape llama-3.1-8b --draft-vocab 32000 --batch-size 1,8 --speculative-num-steps 3 --speculative-eagle-topk 4 \
    --speculative-num-draft-tokens 8 --json "$RESULTS/fp8_draft_8b_tree.json"
  step smollm2 90 $SPEC --model-shape smollm2-135m --draft-vocab 0 --batch-size 1,8 --speculative-num-steps 3 --json "$RESULTS/fp8_draft_smollm2_chain3.json"
fi
if [[ $PART == repeat || $PART == all ]]; then
  SPEC="$B/aerie-bench speculative --rounds 20 --algorithm EAGLE3 --draft-chain runner --speculative-draft-model-quantization none fp8"
  for i in 1 2 3; do
    step repeat$i 90 $SPEC --model-shape llama-3.1-8b --draft-vocab 32000 --batch-size 1 --speculative-num-steps 3 --json "$RESULTS/fp8_draft_8b_chain3_b1_repeat$i.json"
  done
fi
if [[ $PART == rows ]]; then
  SPEC="$B/aerie-bench speculative --rounds 20 --algorithm EAGLE3 --draft-chain runner --speculative-draft-model-quantization fp8"
  for round in $(seq 1 "${ROUNDS:-2}"); do
    for r in ${FP8_ROWS:-1 2 4 16}; do
      STEP_TAIL=3 step "rows${r}_$round" 120 env AERIE_GEMV_FP8_ROWS="$r" $SPEC --model-shape llama-3.1-8b --draft-vocab 32000 \
        --batch-size 1 --speculative-num-steps 3 --json "$LOGS/fp8_rows${r}_$round.json"
    done
  done
  python3 - "$LOGS" <<'PY' | tee "$RESULTS/fp8_rows_ab.txt"
import glob, json, os, sys
rows = {}
for f in sorted(glob.glob(os.path.join(sys.argv[1], "fp8_rows*_*.json"))):
    setting = os.path.basename(f)[len("fp8_rows"):-5].split("_")[0]
    for r in json.load(open(f)):
        rows.setdefault(int(setting), []).append(r)
print("rows/block  plain ms  draft fwd ms  extend ms  propose ms  round ms  round/plain   (one column per run)")
for k, v in sorted(rows.items()):
    col = lambda f: " ".join(f"{f(r):.3f}" for r in v)
    print(f"{k:>10}  {col(lambda r: r['plain_step_ms'])}  {col(lambda r: r['draft_forward_ms'])}  {col(lambda r: r['draft_extend_ms'])}  "
          f"{col(lambda r: r['round_stages_ms']['propose'])}  {col(lambda r: r['round_ms'])}  {col(lambda r: r['round_ms'] / r['plain_step_ms'])}")
PY
fi
pack_logs
exit $status
