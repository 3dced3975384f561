#!/usr/bin/env bash
# On one H200 (device kind nvidia-h200): decode steps against the HBM floor (aerie-bench one-batch,
# graphs on, 512-token prompts) of this build against a base build, interleaved over ROUNDS rounds
# (default 2) so that clocks and neighbours drift alike: 8B shape at batch 1/32/128/256, 1B at
# batch 1. Here, first:
#   BUILD_DIR=build BINS="launch/aerie-bench" bash tools/device_pack.sh            # .device.tgz
#   git worktree add /tmp/base <rev> && cmake -S /tmp/base -B /tmp/base/build -G Ninja \
#     -DCMAKE_BUILD_TYPE=Release -DAERIE_BUILD_TESTS=OFF -DCMAKE_CUDA_ARCHITECTURES=90 &&
#     ninja -C /tmp/base/build launch/aerie-bench
#   mkdir -p .device_base/bin && cp /tmp/base/build/launch/aerie-bench .device_base/bin/ &&
#     strip .device_base/bin/* && tar czf .device_base.tgz .device_base    # the libraries: .device's
#   device run (carry [".device.tgz", ".device_base.tgz"]): bash tools/gpu_decode_build_ab.sh
# VARIANTS (default "base new") may add settings of this build as NAME:ENV=VALUE,... (e.g.
# "base new rows2:AERIE_GEMV_ONE_ROW_ROWS=2"; a setting starting with -- is a flag of the bench's,
# e.g. --graph-context=8192); "base" is the base build, any other name this one
# (without "base", no .device_base.tgz is needed). BATCHES_8B (default 1,32,128,256) and
# BATCHES_1B (default 1) pick the 8B and 1B shapes' batches; SMOLLM2=1 adds the SmolLM2-135M shape
# (30 small layers) at BATCHES_SMOLLM2 (default 1).
# DEADLINE_S stops starting runs after that many seconds.
# The table in $OUT/decode_build_ab.txt, each run's JSON in $OUT/logs.tgz.
set -uo pipefail
RESULTS=${OUT:-/tmp/aerie-gpu-decode-ab}
source "$(dirname "$0")/gpu_steps.sh"
[[ " ${VARIANTS:-base new} " == *" base "* ]] && { rm -rf .device_base && tar xzf .device_base.tgz; }
for round in $(seq 1 "${ROUNDS:-2}"); do
  for variant in ${VARIANTS:-base new}; do
    # DEADLINE_S: start no run past this many seconds, so that a device call's limit leaves the table.
    (( SECONDS < ${DEADLINE_S:-100000} )) || { echo "deadline: round $round, $variant and later skipped"; break 2; }
    build=${variant%%:*}
    settings=() envs=() args=()
    [[ $variant == *:* ]] && IFS=, read -r -a settings <<< "${variant#*:}"
    for x in "${settings[@]}"; do [[ $x == --* ]] && args+=("$x") || envs+=("$x"); done
    bin=$B/aerie-bench
    [[ $build == base ]] && bin=$PWD/.device_base/bin/aerie-bench
    ONE=(env "${envs[@]}" "$bin" one-batch --load-format dummy --cuda-graph on --input-len 512 --output-len 32 "${args[@]}")
    STEP_TAIL=0 step "8b_${build}_$round" 300 "${ONE[@]}" --model-shape llama-3.1-8b --batch-size "${BATCHES_8B:-1,32,128,256}" --json "$LOGS/8b_${build}_$round.json"
    STEP_TAIL=0 step "1b_${build}_$round" 120 "${ONE[@]}" --model-shape llama-3.2-1b --batch-size "${BATCHES_1B:-1}" --json "$LOGS/1b_${build}_$round.json"
    [[ ${SMOLLM2:-0} == 1 ]] && STEP_TAIL=0 step "smollm2_${build}_$round" 120 "${ONE[@]}" --model-shape smollm2-135m --batch-size "${BATCHES_SMOLLM2:-1}" \
      --json "$LOGS/smollm2_${build}_$round.json"
  done
done
python3 - "$LOGS" <<'PY' | tee "$RESULTS/decode_build_ab.txt"
import glob, json, os, sys
rows = {}
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*_*_*.json"))):
    parts = os.path.basename(f)[:-5].split("_")  # shape_setting_round; a setting's name may hold "_"
    shape, build, rnd = parts[0], "_".join(parts[1:-1]), parts[-1]
    for r in json.load(open(f))["results"]:
        rows.setdefault((shape, r["batch_size"], build), []).append((r["decode_step_ms"], r["fraction_of_floor"]))
print("  shape batch build   decode ms per round      of floor per round")
for (shape, batch, build), v in sorted(rows.items()):
    print(f"{shape:>7} {batch:>5} {build:>5}   {' '.join(f'{x[0]:.3f}' for x in v):>20}   {' '.join(f'{100 * x[1]:.1f}%' for x in v)}")
PY
pack_logs
exit $status
