#!/usr/bin/env bash
# On the GPU machine: trains SmolLM2's EAGLE-3 head (tools/train_eagle3/train.py) with
# transformers + torch there, from .device_model/ (the GGUF in parts, its sha256, and the gguf +
# accelerate packages under py/: see tools/gpu_smollm2_bench.sh). Writes the head to
# .device_model/head (kept on a warm machine for tools/gpu_eagle3_eval.sh) and $OUT/head.
#   device run (carry [".device_model/..."]): bash tools/gpu_eagle3_train.sh [train.py flags]
# Generating the answers and training together may not fit one 600 s device call (measured:
# 12,800 answers took 132 s in one session and ~220 s in another): make the answers in one call
# and train in the next on the warm machine, both with --data-cache .device_model/answers.json
# (the first with --data-only). --texts .device_model/texts (tools/train_eagle3/fetch_texts.sh,
# carried too) adds prompts on quotations and words; --wall-budget S ends training in time;
# --init-head assets/smollm2-eagle3 goes on training the shipped head, so device calls add up.
# --answers-by .device/bin/aerie-generate makes the answers with Aerie's engine instead of
# transformers' generate (carry .device.tgz from BUILD_DIR=build BINS=launch/aerie-generate bash
# tools/device_pack.sh; it is unpacked here): 96,800 answers, 12.3M tokens, at 85-92k tok/s on
# one H200, 227 s for the whole --data-only call (docs/performance.md).
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -f .device.tgz ]]; then
  rm -rf .device && tar xzf .device.tgz
  export LD_LIBRARY_PATH=$PWD/.device/lib:${LD_LIBRARY_PATH:-}
fi
OUT=${OUT:-/tmp/aerie-eagle3}
M=$(bash tools/device_model_gguf.sh) || exit 1
rm -rf .device_model/head
PYTHONPATH=$PWD/.device_model/py python3 tools/train_eagle3/train.py --model "$M" --out .device_model/head "$@" 2>&1 |
  grep -v "Converting and de-quantizing\|Loading weights" | tee "$OUT/train_log.txt"
[[ -f .device_model/head/model.safetensors ]] || exit 0  # --data-only
# Files come back from $OUT at 16 MiB at most: the weights in parts (cat head_model.part_* > model.safetensors).
mkdir -p "$OUT/head"
cp .device_model/head/config.json .device_model/head/training.json "$OUT/head/"
split -b 15m .device_model/head/model.safetensors "$OUT/head/model.safetensors.part_"
sha256sum .device_model/head/model.safetensors | cut -d' ' -f1 > "$OUT/head/model.safetensors.sha256"
