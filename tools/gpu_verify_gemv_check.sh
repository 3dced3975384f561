#!/usr/bin/env bash
# On one H200 (device kind nvidia-h200): what a speculative round on the SmolLM2-135M shape costs
# (aerie-bench speculative: random weights, an EAGLE-3 head over the shipped head's 16,384-token
# draft vocabulary, batch 1, chains of 3 and 5) and plain decoding at 1-8 rows (aerie-bench
# one-batch), under each of VARIANTS (NAME or NAME:ENV=VALUE,...; default "default
# cuda_core:AERIE_GEMV_MMA=0": the tensor-core GEMV for 3-16 rows against the CUDA-core one for
# 3-8), interleaved over ROUNDS (default 2). Here, first:
#   BUILD_DIR=build BINS="launch/aerie-bench" bash tools/device_pack.sh
#   device run (carry [".device.tgz"]): bash tools/gpu_verify_gemv_check.sh
set -uo pipefail
RESULTS=${OUT:-/tmp/aerie-gpu-verify-gemv}
source "$(dirname "$0")/gpu_steps.sh"
SHAPE=(--model-shape smollm2-135m)
for round in $(seq 1 "${ROUNDS:-2}"); do
  for variant in ${VARIANTS:-default cuda_core:AERIE_GEMV_MMA=0}; do
    name=${variant%%:*}
    envs=()
    [[ $variant == *:* ]] && IFS=, read -r -a envs <<< "${variant#*:}"
    for steps in 3 5; do
      STEP_TAIL=0 step "spec_${name}_${steps}_$round" 240 env "${envs[@]}" "$B/aerie-bench" speculative --device cuda "${SHAPE[@]}" \
        --algorithm EAGLE3 --draft-vocab 16384 --batch-size 1 --speculative-num-steps "$steps" --input-len 64 --rounds 100 \
        --json "$LOGS/spec_${name}_${steps}_$round.json"
    done
    STEP_TAIL=0 step "plain_${name}_$round" 240 env "${envs[@]}" "$B/aerie-bench" one-batch --load-format dummy --cuda-graph on "${SHAPE[@]}" \
      --batch-size 1,2,4,6,8 --input-len 512 --output-len 32 --json "$LOGS/plain_${name}_$round.json"
  done
done
python3 - "$LOGS" <<'PY' | tee "$RESULTS/verify_gemv.txt"
import glob, json, os, sys
print(f"{'variant':>10} {'steps':>5}  plain ms  verify ms  propose ms  round ms  round/plain   (per round)")
rows = {}
for f in sorted(glob.glob(os.path.join(sys.argv[1], "spec_*.json"))):
    name, steps, rnd = os.path.basename(f)[:-5][len("spec_"):].rsplit("_", 2)  # names may hold "_"
    d = json.load(open(f))[0]
    st = d["round_stages_ms"]
    print(f"{name:>10} {steps:>5}  {d['plain_step_ms']:8.3f}  {st['verify']:9.3f}  {st['propose']:10.3f}  {d['round_ms']:8.3f}  {d['round_ms'] / d['plain_step_ms']:11.2f}   ({rnd})")
print()
print(f"{'variant':>10} batch  decode ms per round")
for f in sorted(glob.glob(os.path.join(sys.argv[1], "plain_*.json"))):
    name, rnd = os.path.basename(f)[:-5][len("plain_"):].rsplit("_", 1)
    for r in json.load(open(f))["results"]:
        rows.setdefault((name, r["batch_size"]), []).append(r["decode_step_ms"])
for (name, batch), v in sorted(rows.items()):
    print(f"{name:>10} {batch:>5}  {' '.join(f'{x:.3f}' for x in v)}")
PY
pack_logs
exit $status
