#!/usr/bin/env bash
# #19 on this machine's CPU: the real SmolLM2 and the shipped EAGLE-3 head through
# `aerie-generate --chat` (tools/train_eagle3/eval_spec.py), plain decoding against speculative
# configurations in the same run, for each CPU product mode, interleaved over ROUNDS rounds so
# that a noisy VM's drift falls on every mode alike. Greedy answers must equal plain decoding's
# (eval_spec.py fails the run otherwise in f32).
#   MODES    "exact draft-int8 int8" (default): exact = the f32 model's numbers (the default
#            path), the head's products in bf16; draft-int8 = the same target, the head's as
#            Q8_0 over int8 activations (--speculative-draft-model-quantization w8a8_int8, AMX);
#            int8 = AERIE_CPU_INT8_ACTIVATIONS=1 (llama.cpp's int8 activations for both, on AMX)
#   ROUNDS   2; PROMPTS 32 held-out prompts; MAX_NEW 256 tokens (most answers end before it);
#   BATCHES  "1"; TEMPS "0"; CONFIGS "plain chain-2 chain-3 chain-4"
#   OUT      where the JSON files and table go (default /tmp/aerie-cpu-spec-eval)
#   GGUF     the model (default: tools/fetch_smollm2.py's cache); BIN build/launch/aerie-generate
#   bash tools/cpu_spec_eval.sh
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/aerie-cpu-spec-eval}
GGUF=${GGUF:-$HOME/.cache/aerie/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf}
BIN=${BIN:-build/launch/aerie-generate}
MODES=${MODES:-"exact draft-int8 int8"}
mkdir -p "$OUT"
[[ -f $GGUF ]] || { echo "cpu_spec_eval: no model at $GGUF (python3 tools/fetch_smollm2.py)" >&2; exit 1; }
for round in $(seq 1 "${ROUNDS:-2}"); do
  for mode in $MODES; do
    extra=""
    case $mode in
      exact) int8=0 ;;
      draft-int8) int8=0 extra="--speculative-draft-model-quantization=w8a8_int8" ;;
      int8) int8=1 ;;
      *) echo "cpu_spec_eval: unknown mode $mode (exact, draft-int8, int8)" >&2; exit 1 ;;
    esac
    echo "== round $round, $mode" >&2
    # shellcheck disable=SC2086
    AERIE_CPU_INT8_ACTIVATIONS=$int8 python3 tools/train_eagle3/eval_spec.py --generate "$BIN" --model "$GGUF" \
      --head assets/smollm2-eagle3 --device cpu --dtype f32 --prompts "${PROMPTS:-32}" --max-new "${MAX_NEW:-256}" \
      --batch-size ${BATCHES:-1} --temperature ${TEMPS:-0} --configs ${CONFIGS:-plain chain-2 chain-3 chain-4} \
      --extra="$extra" --json "$OUT/${mode}_r$round.json" | grep -E "^batch" | sed "s/^/$mode r$round: /" | tee -a "$OUT/table.txt"
  done
done
