#!/usr/bin/env bash
# On the GPU machine: SmolLM2-135M-Instruct (the real model) on one H200, Aerie beside
# transformers in the same run: a greedy chat answer (bf16), aerie-bench one-batch (bf16, CUDA
# graphs on and off, batch 1/8/32) and tools/bench_hf_decode.py (bf16, eager, batch 1).
# Carry .device.tgz (tools/device_pack.sh) and .device_model/: the GGUF split in parts
# (smollm2.gguf.part_*, its sha256) and the pure-Python gguf + accelerate packages under py/,
# which transformers needs to read GGUF and the machine lacks. The parts may come in earlier
# runs (a run carries at most 64 MiB; a warm machine keeps git-ignored files).
#   device run (carry [".device.tgz", ".device_model/..."]): bash tools/gpu_smollm2_bench.sh
set -uo pipefail
cd "$(dirname "$0")/.."
RESULTS=${OUT:-/tmp/aerie-smollm2}
rm -rf .device
source tools/gpu_steps.sh
M=$(bash tools/device_model_gguf.sh) || exit 1
step generate 300 "$B/aerie-generate" --model-path "$M" --device cuda --dtype bf16 --chat --temperature 0 --max-new-tokens 64 \
  --output json --prompt "What is the capital of France?" --prompt "Give me three tips for a good night's sleep."
step aerie_bench 400 "$B/aerie-bench" one-batch --model-path "$M" --device cuda --dtype bf16 --batch-size 1,8,32 \
  --input-len 64 --output-len 64 --cuda-graph both --json "$RESULTS/smollm2_aerie_h200.json"
step hf_bench 400 env PYTHONPATH="$PWD/.device_model/py" python3 tools/bench_hf_decode.py --model "$M" --device cuda \
  --dtype bfloat16 --input-len 64 --output-len 64
cp "$LOGS/hf_bench.txt" "$RESULTS/smollm2_hf_h200.txt"
pack_logs
exit $status
