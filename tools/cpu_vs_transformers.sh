#!/usr/bin/env bash
# The CPU backend against Hugging Face transformers on the same machine, minutes apart
# (issue #21 item 5): SmolLM2-135M-Instruct (the embedded default, GGUF dequantized to f32),
# batch 1 and 8, a prompt of INPUT_LEN tokens, OUTPUT_LEN greedy tokens. Prints one table
# with prefill and decode tokens per second and Aerie's ratio; raw results in $RESULTS.
#   tools/cpu_vs_transformers.sh [MODEL.gguf]
# Env: BUILD_DIR (build), INPUT_LEN (128), OUTPUT_LEN (16), BATCHES ("1 8"), RESULTS (/tmp/cpu_vs_hf).
set -euo pipefail
cd "$(dirname "$0")/.."
B=${BUILD_DIR:-build}
MODEL=${1:-$(python3 tools/fetch_smollm2.py)}
IN=${INPUT_LEN:-128}
OUTL=${OUTPUT_LEN:-16}
BATCHES=${BATCHES:-"1 8"}
R=${RESULTS:-/tmp/cpu_vs_hf}
mkdir -p "$R"
# Aerie: each batch size twice in one process (the first run of a shape also JIT-compiles
# oneDNN's kernels); the table takes the faster.
bs_list=$(for b in $BATCHES; do printf '%s,%s,' "$b" "$b"; done)
"$B/launch/aerie-bench" one-batch --model-path "$MODEL" --device cpu --batch-size "${bs_list%,}" --input-len "$IN" \
  --output-len "$OUTL" --json "$R/aerie.json" | tee "$R/aerie.txt"
python3 tools/bench_hf_decode.py --model "$MODEL" --device cpu --dtype float32 --batch-size $BATCHES --input-len "$IN" \
  --output-len "$OUTL" --repeats 3 2>/dev/null | tee "$R/transformers.jsonl"
python3 - "$R" <<'PY'
import json, sys
r = sys.argv[1]
aerie = {}
for row in json.load(open(f"{r}/aerie.json"))["results"]:
    b = row["batch_size"]
    best = aerie.setdefault(b, {"prefill": 0.0, "decode": 0.0})
    best["prefill"] = max(best["prefill"], row["prefill_tok_s"])
    best["decode"] = max(best["decode"], b / (row["decode_step_ms"] * 1e-3))
print("| batch | Aerie prefill tok/s | transformers | ratio | Aerie decode tok/s | transformers | ratio |")
print("|------:|--------------------:|-------------:|------:|-------------------:|-------------:|------:|")
for line in open(f"{r}/transformers.jsonl"):
    hf = json.loads(line)
    b = hf["batch_size"]
    a = aerie[b]
    print(f"| {b} | {a['prefill']:.0f} | {hf['prefill_tok_per_s']:.0f} | {a['prefill'] / hf['prefill_tok_per_s']:.2f}x "
          f"| {a['decode']:.1f} | {hf['decode_tok_per_s']:.1f} | {a['decode'] / hf['decode_tok_per_s']:.2f}x |")
PY
