#!/usr/bin/env bash
# On the GPU machine: distils STANDALONE drafts for SmolLM2 (tools/train_eagle3/distill_draft.py,
# #19's item 3), one per LAYERS entry, in parallel, on the target's own answers, then measures
# each against plain decoding on held-out prompts (eval_spec.py --algorithm STANDALONE).
#   device run (carry [".device.tgz"], the GGUF already in .device_model/ as for
#   tools/gpu_eagle3_train.sh): bash tools/gpu_standalone_draft.sh [train.py's data flags]
# MODEL a GGUF elsewhere (default: .device_model's parts); LAYERS (default "0,29 0,1,28,29": the target layers each draft starts from), WALL (seconds the
# drafts' runs may take, answers included; default 420), PROMPTS / CONFIGS / BATCHES / TEMPS for
# the evaluation (defaults 96, "plain chain-3 chain-5", 1, 0). The drafts stay in
# .device_model/draft_<layers> (70-85 MB each: too large to come back; a later call on the warm
# machine can evaluate them further with ALGORITHM=STANDALONE HEAD=... tools/gpu_eagle3_eval.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
# GENERATE and DEVICE (default .device/bin/aerie-generate from .device.tgz, cuda) let the script run on
# this machine's CPU build for a smoke test (DEVICE=cpu GENERATE=build/launch/aerie-generate ... --limit-prompts 4).
GENERATE=${GENERATE:-}
if [[ -z $GENERATE ]]; then
  rm -rf .device && tar xzf .device.tgz
  export LD_LIBRARY_PATH=$PWD/.device/lib:${LD_LIBRARY_PATH:-}
  GENERATE=.device/bin/aerie-generate
fi
DEVICE=${DEVICE:-cuda}
export PYTHONPATH=$PWD/.device_model/py PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/aerie-standalone}
mkdir -p "$OUT"
M=${MODEL:-$PWD/.device_model/smollm2.gguf}
if [[ -z ${MODEL:-} ]]; then
  M=$(bash tools/device_model_gguf.sh) || exit 1
fi
START=$(date +%s)
CACHE=.device_model/distill_answers.json
DISTILL=(python3 tools/train_eagle3/distill_draft.py --model "$M" --device "$DEVICE" --answers-by "$GENERATE" --data-cache "$CACHE" "$@")
"${DISTILL[@]}" --out /tmp/unused --data-only 2>&1 | grep -v "Converting and de-quantizing\|Loading weights" | tee "$OUT/answers_log.txt"
LEFT=$(( ${WALL:-420} - ($(date +%s) - START) ))
pids=()
for L in ${LAYERS:-0,29 0,1,28,29}; do
  tag=${L//,/-}
  rm -rf ".device_model/draft_$tag"
  "${DISTILL[@]}" --layers "$L" --out ".device_model/draft_$tag" --wall-budget "$LEFT" 2>&1 |
    grep -v "Converting and de-quantizing\|Loading weights\|Writing model shards" > "$OUT/distill_$tag.txt" &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
for L in ${LAYERS:-0,29 0,1,28,29}; do
  tag=${L//,/-}
  tail -4 "$OUT/distill_$tag.txt"
  cp ".device_model/draft_$tag/training.json" "$OUT/draft_${tag}_training.json"
  python3 tools/train_eagle3/eval_spec.py --generate "$GENERATE" --model "$M" --head ".device_model/draft_$tag" \
    --algorithm STANDALONE --device "$DEVICE" --dtype ${DTYPE:-bf16} --prompts ${PROMPTS:-96} --max-new ${MAX_NEW:-128} --batch-size ${BATCHES:-1} \
    --temperature ${TEMPS:-0} --configs ${CONFIGS:-plain chain-3 chain-5} --json "$OUT/standalone_${tag}_eval.json" || echo "evaluation of draft_$tag failed"
done
