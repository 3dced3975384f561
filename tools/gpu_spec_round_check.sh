#!/usr/bin/env bash
# On one H200 (device kind nvidia-h200), with .device.tgz from
# BUILD_DIR=build BINS="launch/aerie-bench launch/aerie-generate" bash tools/device_pack.sh carried:
# what a speculative round costs through the whole engine (aerie-generate: Scheduler, worker and
# DraftWorker actors) against the worker alone (aerie-bench speculative), SmolLM2-135M shape,
# random weights and a random EAGLE-3 head over the full vocabulary (one token a round, so a
# round's time is wall time / verify forwards), batch 1, chain of 3, in one call.
# `draft` instead: the worker's round with the DraftWorker behind its actor and in-process, at the
# shipped head's draft vocabulary (16,384) and the full one, chains of 3 and 5 (aerie-bench only).
#   device run (carry [".device.tgz"]): bash tools/gpu_spec_round_check.sh [engine|draft]
set -uo pipefail
RESULTS=${OUT:-/tmp/aerie-gpu-spec-round}
source "$(dirname "$0")/gpu_steps.sh"
SHAPE=(--model-shape smollm2-135m)
if [[ ${1:-engine} == draft ]]; then
  for vocab in 16384 0; do
    for steps in 3 5; do
      for actor in actor in_process; do
        flag=()
        [[ $actor == in_process ]] && flag=(--no-draft-actor)
        STEP_TAIL=0 step "draft_${vocab}_${steps}_${actor}" 240 "$B/aerie-bench" speculative --device cuda "${SHAPE[@]}" --algorithm EAGLE3 \
          --draft-vocab "$vocab" --batch-size 1 --speculative-num-steps "$steps" --input-len 64 --rounds 100 "${flag[@]}" \
          --json "$LOGS/draft_${vocab}_${steps}_${actor}.json"
      done
    done
  done
  python3 - "$LOGS" <<'PY' | tee "$RESULTS/spec_draft_parts.txt"
import glob, json, os, sys
print(f"{'draft vocab':>11} {'steps':>5} {'draft':>10}  plain ms  verify ms  propose ms  round ms  round/plain")
for f in sorted(glob.glob(os.path.join(sys.argv[1], "draft_*.json"))):
    _, vocab, steps, actor = os.path.basename(f)[:-5].split("_", 3)
    d = json.load(open(f))[0]
    st = d["round_stages_ms"]
    print(f"{vocab:>11} {steps:>5} {actor:>10}  {d['plain_step_ms']:8.3f}  {st['verify']:9.3f}  {st['propose']:10.3f}  {d['round_ms']:8.3f}  {d['round_ms'] / d['plain_step_ms']:11.2f}")
PY
  pack_logs
  exit $status
fi
STEP_TAIL=6 step bench_chain3 240 "$B/aerie-bench" speculative --device cuda "${SHAPE[@]}" --algorithm EAGLE3 --draft-vocab 0 \
  --batch-size 1 --speculative-num-steps 3 --input-len 64 --rounds 100 --json "$RESULTS/spec_round_bench.json"
PROMPTS=()
for i in $(seq 1 8); do PROMPTS+=(--input-ids "$((i + 10)),20,30,40,50,60,70,80"); done
GEN=("$B/aerie-generate" --load-format dummy "${SHAPE[@]}" --device cuda --dtype bf16 --temperature 0 --max-new-tokens 512 --ignore-eos
  --max-running-requests 1 "${PROMPTS[@]}")
EAGLE=(--speculative-algorithm EAGLE3 --speculative-num-steps 3 --speculative-eagle-topk 1)
for round in 1 2; do
  STEP_TAIL=1 step "generate_plain_$round" 240 "${GEN[@]}"
  STEP_TAIL=1 step "generate_chain3_$round" 240 "${GEN[@]}" "${EAGLE[@]}"
  STEP_TAIL=1 step "generate_chain3_overlap_$round" 240 "${GEN[@]}" "${EAGLE[@]}" --enable-spec-overlap
  STEP_TAIL=1 step "generate_chain3_nooverlap_$round" 240 "${GEN[@]}" "${EAGLE[@]}" --disable-overlap-schedule
done
{
  python3 - "$LOGS" "$RESULTS/spec_round_bench.json" <<'PY'
import glob, json, os, re, sys
logs, bench = sys.argv[1], json.load(open(sys.argv[2]))[0]
print(f"worker alone (aerie-bench speculative): plain step {bench['plain_step_ms']:.3f} ms, round {bench['round_ms']:.3f} ms, "
      f"stages {json.dumps({k: round(v, 3) for k, v in bench['round_stages_ms'].items()})}")
for f in sorted(glob.glob(os.path.join(logs, "generate_*.txt"))):
    text = open(f).read()
    m = re.search(r"(\d+) output tokens in ([\d.]+) s", text)
    if not m:
        print(os.path.basename(f), "no summary line"); continue
    v = re.search(r"(\d+) verify forwards", text)
    tokens, secs, verifies = int(m.group(1)), float(m.group(2)), v.group(1) if v else None
    per = secs * 1e3 / (int(verifies) if verifies else tokens)
    print(f"{os.path.basename(f)[:-4]:<32} {tokens} tokens in {secs:.3f} s: {per:.3f} ms a {'round' if verifies else 'token'}")
PY
} | tee "$RESULTS/spec_round_summary.txt"
pack_logs
exit $status
