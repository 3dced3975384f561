#!/usr/bin/env bash
# On a 2-GPU machine (device kind nvidia-h200-x2), with .device/ from tools/device_pack.sh:
# aerie-generate with two replicas (one per GPU, under mpirun) against one process.
# In bf16 the two runs batch differently (32 rows against 16 per replica), cuBLAS picks
# kernels by batch size, and greedy paths can part at near-ties of the random model: the
# script reports how far the outputs agree (exact equality is tested on CPU, in fp32).
set -uo pipefail
cd "$(dirname "$0")/.."
[[ -d .device ]] || tar xzf .device.tgz  # tools/device_pack.sh
export LD_LIBRARY_PATH=$PWD/.device/lib:${LD_LIBRARY_PATH:-} NCCL_NVLS_ENABLE=0
B=$PWD/.device/bin
args=(--load-format dummy --model-shape llama-3.2-1b --device cuda --max-new-tokens 16 --temperature 0 --ignore-eos
      --max-total-tokens 65536 --output json)
for i in $(seq 1 32); do args+=(--input-ids "$(python3 -c "import random; r=random.Random($i); print(','.join(str(r.randrange(3,128000)) for _ in range(r.randint(1,200))))")"); done
"$B/aerie-generate" "${args[@]}" > /tmp/single.jsonl || exit 1
mpirun --allow-run-as-root -np 2 -x NCCL_NVLS_ENABLE=0 -x LD_LIBRARY_PATH "$B/aerie-generate" "${args[@]}" --dp-size 2 > /tmp/dp2.jsonl || exit 1
python3 - <<'PY'
import json
a = [json.loads(l)["output_ids"] for l in open("/tmp/single.jsonl")]
b = [json.loads(l)["output_ids"] for l in open("/tmp/dp2.jsonl")]
assert len(a) == len(b) == 32, (len(a), len(b))
same = sum(x == y for x, y in zip(a, b))
prefix = [next((i for i, (p, q) in enumerate(zip(x, y)) if p != q), len(x)) for x, y in zip(a, b)]
first = sum(x[0] == y[0] for x, y in zip(a, b))
print(f"dp2 on 2 GPUs: {same}/32 outputs identical, first token equal in {first}/32, mean common prefix {sum(prefix)/32:.1f}/16")
PY
