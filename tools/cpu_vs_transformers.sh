#!/usr/bin/env bash
# The CPU backend against its peers on the same machine, minutes apart (issue #21 item 5):
# SmolLM2-135M-Instruct (the embedded default's Q4_1 GGUF), batch 1 and 8, a prompt of INPUT_LEN
# tokens, OUTPUT_LEN greedy tokens. Prints one table of prefill and decode tokens per second:
#   - Aerie as it runs (f32 activations; decode reads the GGUF's Q4_1/Q8_0 blocks in place) and
#     with AERIE_CPU_GGUF_BLOCKS=0 (the f32 copies only: the same numbers, 32 bits a weight);
#   - Hugging Face transformers (float32, the weights dequantized by the gguf package);
#   - with LLAMA_CPP=1, llama.cpp's CPU path (llama-batched-bench, tools/build_llama_cpp.sh) on the
#     same Q4_1 file (its quantized kernels: int8 dot products over the blocks) and on an F32
#     copy of it (llama-quantize --allow-requantize ... F32: Aerie's arithmetic).
# Aerie's ratios are against transformers and against llama.cpp on the same Q4_1 file.
#   tools/cpu_vs_transformers.sh [MODEL.gguf]
# Env: BUILD_DIR (build), INPUT_LEN (128), OUTPUT_LEN (16), BATCHES ("1 8"), RESULTS (/tmp/cpu_vs_hf),
#      LLAMA_CPP (0; 1 builds llama.cpp once, ~15 min on 2 cores, into /root/.cache/aerie).
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
for variant in blocks f32; do
  AERIE_CPU_GGUF_BLOCKS=$([[ $variant == blocks ]] && echo 1 || echo 0) "$B/launch/aerie-bench" one-batch --model-path "$MODEL" --device cpu \
    --batch-size "${bs_list%,}" --input-len "$IN" --output-len "$OUTL" --json "$R/aerie_$variant.json" | tee "$R/aerie_$variant.txt"
done
python3 tools/bench_hf_decode.py --model "$MODEL" --device cpu --dtype float32 --batch-size $BATCHES --input-len "$IN" \
  --output-len "$OUTL" --repeats 3 2>/dev/null | tee "$R/transformers.jsonl"
rm -f "$R"/llama_cpp_*.txt
if [[ ${LLAMA_CPP:-0} == 1 ]]; then
  LB=$(bash tools/build_llama_cpp.sh)
  [[ -f "$R/model_f32.gguf" ]] || "$LB/llama-quantize" --allow-requantize "$MODEL" "$R/model_f32.gguf" F32 > "$R/llama_quantize.log" 2>&1
  npl=$(echo $BATCHES | tr ' ' ',')
  for variant in q4_1 f32; do
    file=$([[ $variant == q4_1 ]] && echo "$MODEL" || echo "$R/model_f32.gguf")
    "$LB/llama-batched-bench" -m "$file" -t "$(nproc)" -c 4096 -npp "$IN" -ntg "$OUTL" -npl "$npl" 2>/dev/null | tee "$R/llama_cpp_$variant.txt"
  done
fi
python3 - "$R" <<'PY'
import glob, json, os, sys
r = sys.argv[1]

def aerie(name):
    best = {}
    for row in json.load(open(f"{r}/aerie_{name}.json"))["results"]:
        b = row["batch_size"]
        e = best.setdefault(b, {"prefill": 0.0, "decode": 0.0})
        e["prefill"] = max(e["prefill"], row["prefill_tok_s"])
        e["decode"] = max(e["decode"], b / (row["decode_step_ms"] * 1e-3))
    return best

def llama_cpp(name):
    path = f"{r}/llama_cpp_{name}.txt"
    if not os.path.exists(path):
        return {}
    out = {}
    for line in open(path):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 10 and cells[0].isdigit():  # PP | TG | B | N_KV | T_PP | S_PP | T_TG | S_TG | T | S
            out[int(cells[2])] = {"prefill": float(cells[5]), "decode": float(cells[7])}
    return out

peers = {"Aerie": aerie("blocks"), "Aerie, f32 copies only": aerie("f32"), "transformers": {}, "llama.cpp Q4_1": llama_cpp("q4_1"),
         "llama.cpp F32": llama_cpp("f32")}
for line in open(f"{r}/transformers.jsonl"):
    hf = json.loads(line)
    peers["transformers"][hf["batch_size"]] = {"prefill": hf["prefill_tok_per_s"], "decode": hf["decode_tok_per_s"]}
names = [n for n, v in peers.items() if v]
for what in ("prefill", "decode"):
    print(f"\n{what} tok/s (every sequence counted)\n")
    ratios = [n for n in ("transformers", "llama.cpp Q4_1") if n in names]
    print("| batch | " + " | ".join(names) + " | " + " | ".join(f"Aerie / {n}" for n in ratios) + " |")
    print("|------:|" + "---:|" * (len(names) + len(ratios)))
    for b in sorted(peers["Aerie"]):
        row = [f"{peers[n][b][what]:.1f}" if b in peers[n] else "-" for n in names]
        rat = [f"{peers['Aerie'][b][what] / peers[n][b][what]:.2f}x" if b in peers[n] else "-" for n in ratios]
        print(f"| {b} | " + " | ".join(row) + " | " + " | ".join(rat) + " |")
PY
