#!/usr/bin/env bash
# On the GPU machine, after tools/gpu_eagle3_train.sh (or with a head in .device_model/head):
# speculative decoding with the head vs plain decoding on held-out prompts, bf16 (eval_spec.py).
#   device run (carry [".device.tgz"]): bash tools/gpu_eagle3_eval.sh
# HEAD=folder evaluates another head; CONFIGS="plain chain-2 ..." other eval_spec.py configurations;
# DTYPE (default bf16; f32: greedy speculative outputs must equal plain), MAX_NEW (tokens an answer, default 128), BATCHES (default "1 8"), TEMPS (default "0 0.7"), PROMPTS (held-out prompts, default 16), NAME (the JSON's name, default eagle3_eval_h200).
# The environment reaches aerie-generate (e.g. AERIE_ATTN_MIN_SPLIT_KEYS=1 for the kernels' knobs);
# EXTRA more aerie-generate flags for every configuration (e.g. EXTRA=--draft-worker=in-process).
# ALGORITHM=STANDALONE: HEAD is a STANDALONE draft model (tools/gpu_standalone_draft.sh) instead of an EAGLE-3 head.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/aerie-eagle3}
mkdir -p "$OUT"  # eval_spec.py writes its JSON there (a missing folder lost one run's table)
rm -rf .device && tar xzf .device.tgz
export LD_LIBRARY_PATH=$PWD/.device/lib:${LD_LIBRARY_PATH:-}
M=$PWD/.device_model/smollm2.gguf
HEAD=${HEAD:-$PWD/.device_model/head}
[[ -d $HEAD ]] || HEAD=$PWD/assets/smollm2-eagle3
python3 tools/train_eagle3/eval_spec.py --generate .device/bin/aerie-generate --model "$M" --head "$HEAD" --algorithm ${ALGORITHM:-EAGLE3} --device cuda --dtype ${DTYPE:-bf16} \
  --prompts ${PROMPTS:-16} --max-new ${MAX_NEW:-128} --batch-size ${BATCHES:-1 8} --temperature ${TEMPS:-0 0.7} --configs ${CONFIGS:-plain chain-3 chain-5 tree-4x3-8} \
  --extra="${EXTRA:-}" --json "$OUT/${NAME:-eagle3_eval_h200}.json"
