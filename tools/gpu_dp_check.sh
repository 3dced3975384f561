#!/usr/bin/env bash
# On a 2-GPU machine (device kind nvidia-h200-x2), with .device/ from tools/device_pack.sh:
# aerie-generate with two replicas (one per GPU, under mpirun) against one process.
set -uo pipefail
cd "$(dirname "$0")/.."
export LD_LIBRARY_PATH=$PWD/.device/lib:${LD_LIBRARY_PATH:-} NCCL_NVLS_ENABLE=0
B=$PWD/.device/bin
args=(--load-format dummy --model-shape llama-3.2-1b --device cuda --max-new-tokens 16 --temperature 0 --ignore-eos
      --max-total-tokens 65536 --output json)
for i in $(seq 1 32); do args+=(--input-ids "$(python3 -c "import random; r=random.Random($i); print(','.join(str(r.randrange(3,128000)) for _ in range(r.randint(1,200))))")"); done
"$B/aerie-generate" "${args[@]}" > /tmp/single.jsonl || exit 1
mpirun --allow-run-as-root -np 2 -x NCCL_NVLS_ENABLE=0 -x LD_LIBRARY_PATH "$B/aerie-generate" "${args[@]}" --dp-size 2 > /tmp/dp2.jsonl || exit 1
nvidia-smi --query-gpu=index,memory.used --format=csv
if cmp -s /tmp/single.jsonl /tmp/dp2.jsonl; then echo "dp2 on 2 GPUs: 32 outputs identical to one process"; else echo "MISMATCH"; diff /tmp/single.jsonl /tmp/dp2.jsonl | head; exit 1; fi
