#!/usr/bin/env bash
# Every benchmark figure #21 asks for, in one device call, on whatever GPU the call was given:
#   1. gpu_test (every CUDA op against the CPU reference; GPU_TEST=0 skips it);
#   2. aerie-bench one-batch, CUDA graphs: Llama-3.1-8B shape at batches 1/8/32/128/256 and
#      Llama-3.2-1B at 1/8/32/128 (512-token prompts), and one 4096-token 8B prompt;
#   3. the gpt-fast-style compiled PyTorch peer at the 8B rows (tools/gpu_peer_table.sh's table);
#   4. goals.txt: each of #21's numeric goals against the figure measured here.
# Carry .device.tgz from: BUILD_DIR=build BINS="launch/aerie-bench tests/gpu_test" bash tools/device_pack.sh
#   device run: bash tools/gpu_kernel_goals_check.sh        (about 8 minutes on an H100)
# PEER=0 skips step 3 (its torch.compile takes most of the time). Output in $OUT: gpu.txt, gpu_test.log,
# three aerie-bench JSONs, aerie_tables.log (their tables and the peer's stderr), the peer's JSONL,
# goals.txt: 8 files, as many as the device tool brings back.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/aerie-kernel-goals}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
[[ -d .device && .device -nt .device.tgz ]] || { rm -rf .device && tar xzf .device.tgz && touch .device; }
export LD_LIBRARY_PATH=$PWD/.device/lib:${LD_LIBRARY_PATH:-}
B=$PWD/.device/bin
status=0
: > "$OUT/aerie_tables.log"  # every aerie-bench table (the device tool brings back 8 files)
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee "$OUT/gpu.txt"
if [[ ${GPU_TEST:-1} != 0 && -x $B/gpu_test ]]; then
  "$B/gpu_test" --gtest_brief=1 > "$OUT/gpu_test.log" 2>&1 || { echo "gpu_test FAILED"; status=1; }
  tail -n 3 "$OUT/gpu_test.log"
fi
bench() {  # name, then aerie-bench one-batch arguments
  local name=$1; shift
  "$B/aerie-bench" one-batch --load-format dummy --cuda-graph on --json "$OUT/$name.json" "$@" > "$OUT/$name.txt" 2>&1 \
    || { echo "aerie-bench $name FAILED"; status=1; }
  grep -E "^ +[0-9]+ +on|TFLOP" "$OUT/$name.txt"
  { echo "== $name"; cat "$OUT/$name.txt"; } >> "$OUT/aerie_tables.log" && rm "$OUT/$name.txt"
}
bench aerie_llama-3.1-8b --model-shape llama-3.1-8b --batch-size 1,8,32,128,256 --input-len 512 --output-len 32
bench aerie_8b_4096 --model-shape llama-3.1-8b --batch-size 1 --input-len 4096 --output-len 8
bench aerie_llama-3.2-1b --model-shape llama-3.2-1b --batch-size 1,8,32,128 --input-len 512 --output-len 32
if [[ ${PEER:-1} != 0 ]]; then
  : > "$OUT/peer_llama-3.1-8b.jsonl"
  for bs in 1 8 32 128 256; do  # one process per batch: a timeout keeps the rows before it
    python3 tools/bench_torch_compiled.py --model-shape llama-3.1-8b --batch-size "$bs" --input-len 512 --output-len 32 \
      2>> "$OUT/aerie_tables.log" | grep '^{' >> "$OUT/peer_llama-3.1-8b.jsonl" || status=1
  done
fi
python3 - "$OUT" <<'PY' | tee "$OUT/goals.txt"
import json, os, sys
out = sys.argv[1]
def rows(name):
    p = os.path.join(out, name + ".json")
    if not os.path.exists(p):
        return {}
    return {r["batch_size"]: r for r in json.load(open(p))["results"] if r.get("cuda_graph")}
b8, b8_4096, b1 = rows("aerie_llama-3.1-8b"), rows("aerie_8b_4096"), rows("aerie_llama-3.2-1b")
peer = {}
pp = os.path.join(out, "peer_llama-3.1-8b.jsonl")
if os.path.exists(pp):
    peer = {r["batch_size"]: r for r in map(json.loads, open(pp))}
gpu = open(os.path.join(out, "gpu.txt")).read().strip()
print(f"GPU: {gpu}")
def goal(label, value, target):
    if value is None:
        print(f"{label:<44} {'-':>8}  goal {target if target else 'reported'}: NOT MEASURED")
        return
    verdict = "reported" if target is None else ("holds" if value >= target else "NOT MET")
    print(f"{label:<44} {100 * value:7.1f}%  goal {'>= %d%%' % (100 * target) if target else '-'}: {verdict}")
frac = lambda t, bs: t.get(bs, {}).get("fraction_of_floor")
for bs, target in ((1, 0.88), (8, None), (32, 0.75), (128, 0.65), (256, None)):
    goal(f"8B decode, batch {bs}, of the HBM floor", frac(b8, bs), target)
goal("1B decode, batch 1, of the HBM floor", frac(b1, 1), 0.70)
for bs in (8, 32, 128):
    goal(f"1B decode, batch {bs}, of the HBM floor", frac(b1, bs), None)
goal("8B prefill, 512 tokens, MFU (measured rate)", b8.get(1, {}).get("prefill_mfu"), 0.60)
goal("8B prefill, 4096 tokens, MFU (measured rate)", b8_4096.get(1, {}).get("prefill_mfu"), 0.60)
if peer:
    print(f"\n{'batch':>5} {'aerie decode tok/s':>18} {'peer decode tok/s':>17} {'ratio':>6} {'aerie prefill tok/s':>19} {'peer prefill tok/s':>18} {'ratio':>6}")
    for bs in sorted(set(b8) | set(peer)):
        a, p = b8.get(bs, {}), peer.get(bs, {})
        ad, pd, ap, pq = a.get("decode_tok_s"), p.get("decode_tok_s"), a.get("prefill_tok_s"), p.get("prefill_tok_s")
        f = lambda v: f"{v:.0f}" if v else "-"
        r = lambda x, y: f"{x / y:.2f}x" if x and y else "-"
        print(f"{bs:>5} {f(ad):>18} {f(pd):>17} {r(ad, pd):>6} {f(ap):>19} {f(pq):>18} {r(ap, pq):>6}")
PY
exit $status
