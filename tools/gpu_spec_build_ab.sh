#!/usr/bin/env bash
# On one H200 (device kind nvidia-h200): this build against a base build on the speculative path,
# interleaved over ROUNDS rounds (default 2) so that clocks and neighbours drift alike:
#  - a speculative round and a plain step at SmolLM2-135M's shape (aerie-bench speculative, random
#    weights, EAGLE3 head over 16,384 draft tokens, a chain of STEPS (default 5), BATCHES (empty: none; default
#    "1 8")): the device time in each runner's graph;
#  - plain decode against the HBM floor at batch 1 (aerie-bench one-batch, dummy weights, graphs,
#    512-token prompts): the 8B and SmolLM2 shapes;
#  - when .device_model/smollm2.gguf and HEAD (default .device_model/v10) are there, the real
#    model's speedups (eval_spec.py: PROMPTS (default 48) held-out prompts, batch EVAL_BATCHES (default 1), greedy,
#    plain / chain-3 / chain-5, or CONFIGS; needs .device_model/texts and .device_model/py as gpu_eagle3_eval.sh),
#    with the device's busy and idle time a batch where the build prints them;
#  SKIP_BENCH=1 leaves out the two aerie-bench parts (then .device_base.tgz needs only aerie-generate).
# Here, first: BUILD_DIR=build BINS="launch/aerie-bench launch/aerie-generate" bash tools/device_pack.sh,
# and the base build's aerie-bench and aerie-generate in .device_base/bin packed as .device_base.tgz
# (tools/gpu_decode_build_ab.sh says how; the libraries are .device's). Then
#   device run (carry [".device.tgz", ".device_base.tgz"]): bash tools/gpu_spec_build_ab.sh
# The table in $OUT/spec_build_ab.txt, each run's JSON in $OUT/logs.tgz.
set -uo pipefail
RESULTS=${OUT:-/tmp/aerie-gpu-spec-ab}
source "$(dirname "$0")/gpu_steps.sh"
rm -rf .device_base && tar xzf .device_base.tgz
M=$PWD/.device_model/smollm2.gguf
HEAD=${HEAD:-$PWD/.device_model/v10}
for round in $(seq 1 "${ROUNDS:-2}"); do
  for build in base new; do
    bin=$B
    [[ $build == base ]] && bin=$PWD/.device_base/bin
    [[ -n ${SKIP_BENCH:-} ]] || for bs in ${BATCHES-1 8}; do
      STEP_TAIL=0 step "spec_${build}_b${bs}_$round" 240 "$bin/aerie-bench" "${SMOLLM2_SPEC_ROUND[@]}" --batch-size "$bs" \
        --speculative-num-steps "${STEPS:-5}" --json "$LOGS/spec_${build}_b${bs}_$round.json"
    done
    [[ -n ${SKIP_BENCH:-} ]] || for shape in llama-3.1-8b smollm2-135m; do
      STEP_TAIL=0 step "one_${build}_${shape}_$round" 240 "$bin/aerie-bench" one-batch --load-format dummy --cuda-graph on --input-len 512 \
        --output-len 32 --model-shape "$shape" --batch-size 1 --json "$LOGS/one_${build}_${shape}_$round.json"
    done
    if [[ -f $M && -d $HEAD ]]; then
      STEP_TAIL=0 step "eval_${build}_$round" 300 python3 tools/train_eagle3/eval_spec.py --generate "$bin/aerie-generate" --model "$M" \
        --head "$HEAD" --device cuda --dtype bf16 --prompts "${PROMPTS:-48}" --max-new 128 --batch-size ${EVAL_BATCHES:-1} --temperature 0 \
        --configs ${CONFIGS:-plain chain-3 chain-5} --json "$LOGS/eval_${build}_$round.json"
    fi
  done
done
python3 - "$LOGS" <<'PY' | tee "$RESULTS/spec_build_ab.txt"
import glob, json, os, sys
logs = sys.argv[1]
def runs(pattern):
    return [json.load(open(f)) for f in sorted(glob.glob(os.path.join(logs, pattern)))]
def cells(values, fmt):
    return " / ".join(fmt(v) for v in values)
print("SmolLM2 shape, random weights (aerie-bench speculative): ms a round or plain step, one value per round")
for b in sorted({os.path.basename(f).split("_")[2] for f in glob.glob(os.path.join(logs, "spec_*.json"))}):
    for build in ("base", "new"):
        rows = [next(d for d in r if d["draft_runner"]) for r in runs(f"spec_{build}_{b}_*.json")]
        if rows:
            g = lambda d, k: d["round_graph_ms"].get(k, 0.0)
            f3 = lambda v: f"{v:.3f}"
            print(f"  {b:>3} {build:>4}: round {cells([d['round_ms'] for d in rows], f3)} | verify graph {cells([g(d, 'verify') for d in rows], f3)}"
                  f" | plain step {cells([d['plain_step_ms'] for d in rows], f3)} | round / plain {cells([d['round_ms'] / d['plain_step_ms'] for d in rows], f3)}")
print("Plain decode at batch 1 (aerie-bench one-batch, dummy weights): ms a step (fraction of the HBM floor)")
step = lambda r: f"{r['decode_step_ms']:.3f} ({100 * r['fraction_of_floor']:.1f}%)"
for shape in ("llama-3.1-8b", "smollm2-135m"):
    for build in ("base", "new"):
        rs = [r["results"][0] for r in runs(f"one_{build}_{shape}_*.json")]
        if rs:
            print(f"  {shape:>13} {build:>4}: {cells(rs, step)}")
print("Real SmolLM2 + head, greedy (eval_spec.py): tok/s (speedup over plain in the same run), accept length")
sys.path.insert(0, "tools")
from eval_tables import print_eval_run
for build in ("base", "new"):
    for run in runs(f"eval_{build}_*.json"):
        print_eval_run(build, run)
PY
pack_logs
exit $status
