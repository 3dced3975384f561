#!/usr/bin/env bash
# On one H200 (device kind nvidia-h200), with .device.tgz from BUILD_DIR=build
# BINS="launch/aerie-generate" bash tools/device_pack.sh and the SmolLM2 GGUF at
# .device_model/smollm2.gguf (tools/gpu_smollm2_bench.sh says how its parts travel): whether kernel
# settings change the real model's greedy tokens. aerie-generate decodes 4 prompts (40 tokens each,
# taken from the model's own answers) one at a time (batch 1), 32 greedy tokens, bf16, with the
# defaults and then under each setting of $SETTINGS (NAME:ENV=VALUE,...; a setting starting with
# -- is an aerie-generate flag, e.g. eager:--disable-cuda-graph), and prints how many tokens each
# answer shares with the default's. Kernels that differ only in rounding part late or not at all;
# a wrong one parts at the first decoded tokens (the small-batch tensor-core attention did while it
# read a stale q under programmatic launch: docs/performance.md). AERIE_PDL_OFF=1 (every kernel
# launched without programmatic launch) and --disable-cuda-graph give race-free references.
#   device run (carry [".device.tgz"]): SETTINGS="off:AERIE_ATTN_DECODE_TC_SMALL_BLOCKS=0 pdloff:AERIE_PDL_OFF=1
#     eager:--disable-cuda-graph" bash tools/gpu_attention_tokens_check.sh
set -uo pipefail
RESULTS=${OUT:-/tmp/aerie-gpu-attention-tokens}
source "$(dirname "$0")/gpu_steps.sh"
M=$PWD/.device_model/smollm2.gguf
[[ -f $M ]] || { echo "no $M"; exit 1; }
G=("$B/aerie-generate" --model-path "$M" --device cuda --dtype bf16 --temperature 0 --max-new-tokens 32 --ignore-eos
   --max-running-requests 1 --output json
   --input-ids 13038,5914,314,260,705,282,11513,1096,355,2821,288,354,5936,28,1129,281,253,1360,4054,28,715,347,253,3632,355,253,7294,30,657,3445,260,722,282,1461,2544,288,7218,1096,288,354
   --input-ids 788,4119,28,357,506,702,4464,351,6703,30,5286,346,457,253,2066,3985,351,896,6146,28,284,346,737,288,4110,578,638,288,6492,601,281,253,1647,970,30,1848,506,702,4119,17
   --input-ids 49,25906,868,699,338,4461,314,253,4959,2380,281,260,905,282,984,284,1157,30,657,506,253,4959,2380,338,314,804,281,800,896,1995,282,984,284,1157,28,1285,9843,28,18562,28
   --input-ids 1653,260,2388,38798,618,260,12197,8690,28,260,2139,282,1011,3653,23,17224,284,260,2139,282,480,5806,15305,29261,738,260,1512,30,378,2139,282,480,17224,436,253,3412,282,7697,284,10434)
STEP_TAIL=1 step default 120 "${G[@]}"
mv "$LOGS/default.txt" "$LOGS/default.all"
grep '^{' "$LOGS/default.all" > "$RESULTS/default.jsonl"
for setting in ${SETTINGS:-}; do
  name=${setting%%:*} envs=() args=()
  IFS=, read -r -a parts <<< "${setting#*:}"
  for x in "${parts[@]}"; do [[ $x == --* ]] && args+=("$x") || envs+=("$x"); done
  STEP_TAIL=1 step "$name" 120 env "${envs[@]}" "${G[@]}" "${args[@]}"
  grep '^{' "$LOGS/$name.txt" > "$RESULTS/$name.jsonl"
  python3 - "$RESULTS/default.jsonl" "$RESULTS/$name.jsonl" "$name" <<'PY' | tee -a "$RESULTS/attention_tokens.txt"
import json, sys
a = [json.loads(l)["output_ids"] for l in open(sys.argv[1])]
b = [json.loads(l)["output_ids"] for l in open(sys.argv[2])]
shared = [next((j for j, (u, v) in enumerate(zip(x, y)) if u != v), len(x)) for x, y in zip(a, b)]
print(f"{sys.argv[3]}: tokens shared with the default's answers {shared} of {len(a[0])}")
PY
done
pack_logs
exit $status
