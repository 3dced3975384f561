#!/usr/bin/env bash
# On one H200 (device kind nvidia-h200): two or more settings of ONE build (aerie-generate flags)
# on the real model, interleaved over ROUNDS rounds (default 2) so clocks and neighbours drift
# alike: SmolLM2 + the trained EAGLE-3 head (HEAD, default .device_model/v10), PROMPTS held-out
# prompts (default 200), batch EVAL_BATCHES (default 1), greedy, CONFIGS (default "plain chain-3
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
M=$PWD/.device_model/smollm2.gguf
if [[ ! -f $M ]]; then
  cat .device_model/smollm2.gguf.part_* > "$M" && echo "$(cat .device_model/smollm2.gguf.sha256)  $M" | sha256sum -c || exit 1
fi
HEAD=${HEAD:-$PWD/.device_model/v10}
SETTINGS=${SETTINGS:-"eager:--prefill-cuda-graph-max-tokens=0 graphs:"}
eval_run() {  # name, flags (comma-separated), prompts, configs, more eval_spec.py flags...
  local name=$1 prompts=$3 configs=$4 flags="" envs=() item
  for item in ${2//,/ }; do
    if [[ $item =~ ^[A-Z_]+= ]]; then envs+=("$item"); else flags+=" $item"; fi
  done
  shift 4
  STEP_TAIL=${STEP_TAIL:-0} step "$name" 400 env "${envs[@]}" python3 tools/train_eagle3/eval_spec.py --generate "$B/aerie-generate" \
    --model "$M" --head "$HEAD" --device cuda --dtype ${DTYPE:-bf16} --prompts "$prompts" --max-new 128 --batch-size ${EVAL_BATCHES:-1} \
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
python3 - "$LOGS" "$SETTINGS" <<'PY' | tee "$RESULTS/spec_setting_ab.txt"
import glob, json, os, sys
sys.path.insert(0, "tools")
from eval_tables import print_eval_run
logs, settings = sys.argv[1], [s.split(":")[0] for s in sys.argv[2].split()]
def runs(pattern):
    return [json.load(open(f)) for f in sorted(glob.glob(os.path.join(logs, pattern)))]
print("Real SmolLM2 + head, greedy (eval_spec.py): tok/s (speedup over plain in the same run), accept length")
for name in settings:
    for run in runs(f"eval_{name}_[0-9]*.json"):
        print_eval_run(name, run, width=8)
print("Where the device's time goes (--graph-times): ms a run; gaps between runners, median / mean ms (times)")
for name in settings:
    for run in runs(f"gaps_{name}.json"):
        for d in run["rows"]:
            print(f"  {name:>8} {d['config']} ({d['tok_per_s']:.0f} tok/s, {d['speedup']:.2f}x):")
            for label, g in sorted(d.get("graph_ms_a_run", {}).items()):
                print(f"      {label}: {g['runs']} runs, {g['ms']:.4f} ms a run")
            for between, g in sorted(d.get("gap_ms_between_graphs", {}).items()):
                print(f"      gap {between}: {g['median']:.4f} / {g['mean']:.4f} ({g['times']})")
PY
# Whether each setting's greedy answers are the first setting's (outputs of every configuration).
python3 - "$LOGS" "$SETTINGS" <<'PY' | tee -a "$RESULTS/spec_setting_ab.txt"
import glob, json, os, sys
logs, settings = sys.argv[1], [s.split(":")[0] for s in sys.argv[2].split()]
first = {}
for f in sorted(glob.glob(os.path.join(logs, f"eval_{settings[0]}_[0-9]*.json"))):
    for d in json.load(open(f))["rows"]:
        first.setdefault((d["batch"], d["config"]), d.get("output_ids"))
for name in settings[1:]:
    for f in sorted(glob.glob(os.path.join(logs, f"eval_{name}_[0-9]*.json"))):
        for d in json.load(open(f))["rows"]:
            a, b = first.get((d["batch"], d["config"])), d.get("output_ids")
            if a and b:
                print(f"  {os.path.basename(f)} {d['config']}: {sum(x == y for x, y in zip(a, b))}/{len(b)} answers the same as {settings[0]}'s")
ref = glob.glob(os.path.join(logs, "f32_plain.json"))
if ref:
    f32 = json.load(open(ref[0]))["rows"][0]["output_ids"]
    print("bf16 plain decoding against f32 plain decoding: first token the same / whole answer the same")
    for name in settings:
        for f in sorted(glob.glob(os.path.join(logs, f"eval_{name}_[0-9]*.json"))):
            b = next(d for d in json.load(open(f))["rows"] if d["config"] == "plain")["output_ids"]
            print(f"  {os.path.basename(f)}: {sum(x[0] == y[0] for x, y in zip(f32, b))}/{len(b)} / {sum(x == y for x, y in zip(f32, b))}/{len(b)}")
PY
pack_logs
exit $status
