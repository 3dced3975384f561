#!/usr/bin/env bash
# Where a speculative round's time goes on this machine's CPU: one long greedy answer of the real
# SmolLM2 (ignore-eos, MAX_NEW tokens, default 600) with the shipped EAGLE-3 head, plain decoding
# and each configuration, with --graph-times (the target's decode / verify, the draft's chain,
# tree and extend, ms a run), ROUNDS times interleaved (default 2), so that a verify's cost per
# row and a draft step's cost can be read against a plain step of the same run.
#   CONFIGS  "steps:topk:draft_tokens ..." (default "0:1:1 2:1:3 3:1:4 4:1:5 3:4:8"; 0 = plain)
#   INT8     1 (default): AERIE_CPU_INT8_ACTIVATIONS=1 (the products over int8 activations on AMX);
#            0: the exact f32 path
#   BIN      build/launch/aerie-generate; GGUF the model (tools/fetch_smollm2.py's cache); HEAD
#   bash tools/cpu_round_costs.sh | tee /tmp/round_costs.txt
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-build/launch/aerie-generate}
GGUF=${GGUF:-$HOME/.cache/aerie/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf}
HEAD=${HEAD:-assets/smollm2-eagle3}
PROMPT=${PROMPT:-"Write a detailed essay about the history of the printing press and its effect on European society."}
[[ -f $GGUF ]] || { echo "cpu_round_costs: no model at $GGUF (python3 tools/fetch_smollm2.py)" >&2; exit 1; }
log=$(mktemp)
trap 'rm -f "$log"' EXIT
printf "%-10s %8s %7s %10s %9s %9s %9s %8s\n" config tok/s accept decode_ms verify_ms chain_ms tree_ms extend_ms
for round in $(seq 1 "${ROUNDS:-2}"); do
  for c in ${CONFIGS:-0:1:1 2:1:3 3:1:4 4:1:5 3:4:8}; do
    IFS=: read -r steps topk tokens <<< "$c"
    spec=()
    [[ $steps == 0 ]] || spec=(--speculative-algorithm EAGLE3 --speculative-draft-model-path "$HEAD" --speculative-num-steps "$steps"
                               --speculative-eagle-topk "$topk" --speculative-num-draft-tokens "$tokens")
    AERIE_CPU_INT8_ACTIVATIONS=${INT8:-1} "$BIN" --model "$GGUF" --dtype f32 --chat --prompt "$PROMPT" --max-new-tokens "${MAX_NEW:-600}" \
      --ignore-eos --temperature 0 --output json --max-total-tokens 4096 --graph-times "${spec[@]}" > "$log" 2>&1
    python3 - "$c" "$log" <<'PY'
import re, sys
t = open(sys.argv[2]).read()
tok = re.search(r"\(([\d.]+) tok/s\)", t)
if not tok:
    sys.exit(f"cpu_round_costs: {sys.argv[1]} failed:\n{t[-2000:]}")
acc = re.search(r"\(([\d.]+) tokens per verify", t)
runs = {m.group(1): float(m.group(2)) for m in re.finditer(r"graph ([a-z ()]+?): \d+ runs, ([\d.]+) ms a run", t)}
get = lambda key: next((f"{v:.3f}" for k, v in runs.items() if k.startswith(key)), "-")
print(f"{sys.argv[1]:<10} {float(tok.group(1)):8.1f} {acc.group(1)[:5] if acc else '-':>7} {get('target decode'):>10} {get('target verify'):>9} "
      f"{get('draft chain'):>9} {get('draft tree'):>9} {get('draft extend'):>8}")
PY
  done
done
