#!/usr/bin/env bash
# On one H200 (device kind nvidia-h200): two or more settings of ONE build (aerie-generate flags)
# on the real model, interleaved over ROUNDS rounds (default 2) so clocks and neighbours drift
# alike: SmolLM2 + the trained EAGLE-3 head (HEAD, default .device_model/v10), PROMPTS held-out
# prompts (default 200) of up to MAX_NEW tokens (default 128), batch EVAL_BATCHES (default 1), greedy, CONFIGS (default "plain chain-3
# chain-5 tree-4x5-8"); then, with --graph-times, where the device's time goes in each setting
# (GAP_PROMPTS prompts, default 100, GAP_CONFIGS default "plain chain-5"): each runner's time a run
# and the gaps between runners, by transition.
#   SETTINGS="name:flag,flag name:..." (default "eager:--prefill-cuda-graph-max-tokens=0 graphs:"):
#   the flags of each setting, comma-separated, added to every configuration; NAME=VALUE
#   items are set in aerie-generate's environment instead (e.g. AERIE_SIDE_COPIES=0).
#   F32_REFERENCE=1: plain decoding in f32 too, and how often each setting's bf16 plain answers
#   (first token, whole answer) are the f32 ones.
# Needs .device.tgz (BUILD_DIR=build BINS=launch/aerie-generate bash tools/device_pack.sh) and
# .device_model/ with smollm2.gguf (or its parts and .sha256) and the head.
#   device run (carry [".device.tgz"]): bash tools/gpu_spec_setting_ab.sh
# The table in $OUT/spec_setting_ab.txt, each run's JSON and log in $OUT/logs.tgz.
set -uo pipefail
RESULTS=${OUT:-/tmp/aerie-gpu-setting-ab}
source "$(dirname "$0")/gpu_steps.sh"
M=$(bash tools/device_model_gguf.sh) || exit 1
HEAD=${HEAD:-$PWD/.device_model/v10}
SETTINGS=${SETTINGS:-"eager:--prefill-cuda-graph-max-tokens=0 graphs:"}
eval_run() {  # name, flags (comma-separated), prompts, configs, more eval_spec.py flags...
  local name=$1 prompts=$3 configs=$4 flags="" envs=() item
  for item in ${2//,/ }; do
    if [[ $item =~ ^[A-Z_]+= ]]; then envs+=("$item"); else flags+=" $item"; fi
  done
  shift 4
  STEP_TAIL=${STEP_TAIL:-0} step "$name" 400 env "${envs[@]}" python3 tools/train_eagle3/eval_spec.py --generate "$B/aerie-generate" \
    --model "$M" --head "$HEAD" --device cuda --dtype ${DTYPE:-bf16} --prompts "$prompts" --max-new ${MAX_NEW:-128} --batch-size ${EVAL_BATCHES:-1} \
    --temperature 0 --configs $configs --extra="$flags $*" --json "$LOGS/$name.json"
}
for round in $(seq 1 "${ROUNDS:-2}"); do
  for s in $SETTINGS; do
    eval_run "eval_${s%%:*}_$round" "${s#*:}" "${PROMPTS:-200}" "${CONFIGS:-plain chain-3 chain-5 tree-4x5-8}"
  done
done
[[ -z ${F32_REFERENCE:-} ]] || DTYPE=f32 eval_run "f32_plain" "" "${PROMPTS:-200}" plain
[[ -n ${SKIP_GAPS:-} ]] || for s in $SETTINGS; do
  eval_run "gaps_${s%%:*}" "${s#*:}" "${GAP_PROMPTS:-100}" "${GAP_CONFIGS:-plain chain-5}" --graph-times
done
python3 tools/eval_tables.py setting-ab "$LOGS" "$SETTINGS" | tee "$RESULTS/spec_setting_ab.txt"
pack_logs
exit $status
