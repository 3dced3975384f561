#!/usr/bin/env bash
# #21's peer rows at every batch size in one device call: `aerie-bench one-batch` (CUDA graphs) and
# the gpt-fast-style compiled PyTorch peer (tools/bench_torch_compiled.py) at the same shape, prompt
# and batch sizes, minutes apart on the same GPU; prints decode (and prefill) tokens/s and their
# ratios, Aerie's decode step against its HBM floor.
#   device run (carry [".device.tgz"] with aerie-bench): bash tools/gpu_peer_table.sh
# SHAPE (default llama-3.1-8b), BATCHES (default "1 8 32 128 256"). Output in $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/aerie-peer}
mkdir -p "$OUT"
[[ -d .device && .device -nt .device.tgz ]] || { rm -rf .device && tar xzf .device.tgz && touch .device; }
export LD_LIBRARY_PATH=$PWD/.device/lib:${LD_LIBRARY_PATH:-}
SHAPE=${SHAPE:-llama-3.1-8b}
BATCHES=${BATCHES:-1 8 32 128 256}
status=0
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
.device/bin/aerie-bench one-batch --load-format dummy --model-shape "$SHAPE" --batch-size "${BATCHES// /,}" --input-len 512 \
  --output-len 32 --cuda-graph on --json "$OUT/aerie_$SHAPE.json" > "$OUT/aerie_$SHAPE.txt" 2>&1 || status=1
# One batch size per process, each line written as it comes: a timeout keeps the rows before it.
: > "$OUT/peer_$SHAPE.jsonl"
for bs in $BATCHES; do
  python3 tools/bench_torch_compiled.py --model-shape "$SHAPE" --batch-size "$bs" --input-len 512 --output-len 32 \
    2>> "$OUT/peer_$SHAPE.err" | grep '^{' >> "$OUT/peer_$SHAPE.jsonl" || status=1
done
python3 - "$OUT/aerie_$SHAPE.json" "$OUT/peer_$SHAPE.jsonl" <<'PY' | tee "$OUT/table_$SHAPE.txt"
import json, sys
aerie = {r["batch_size"]: r for r in json.load(open(sys.argv[1]))["results"] if r.get("cuda_graph")}
peer = {r["batch_size"]: r for r in map(json.loads, open(sys.argv[2]))}
print(f"{'batch':>5} {'aerie decode tok/s':>18} {'of floor':>8} {'peer decode tok/s':>17} {'ratio':>6} {'aerie prefill tok/s':>19} {'peer prefill tok/s':>18} {'ratio':>6}")
for bs in sorted(set(aerie) | set(peer)):
    a, p = aerie.get(bs), peer.get(bs)
    ad, pd = (a or {}).get("decode_tok_s"), (p or {}).get("decode_tok_s")
    ap, pp = (a or {}).get("prefill_tok_s"), (p or {}).get("prefill_tok_s")
    fl = (a or {}).get("fraction_of_floor")
    f = lambda v, w=0: f"{v:.{w}f}" if v is not None else "-"
    print(f"{bs:>5} {f(ad):>18} {f(100 * fl if fl else None, 1) + '%':>8} {f(pd):>17} {f(ad / pd if ad and pd else None, 2) + 'x':>6} "
          f"{f(ap):>19} {f(pp):>18} {f(ap / pp if ap and pp else None, 2) + 'x':>6}")
PY
exit $status
