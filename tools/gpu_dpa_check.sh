#!/usr/bin/env bash
# On a 2-GPU machine (device kind nvidia-h200-x2), with .device.tgz from tools/device_pack.sh
# carried along: DP attention (--tp-size 2 --dp-size 2 --enable-dp-attention) on two GPUs.
#  - tp_parity: tests/parallel/tp_parity_main.cpp on both GPUs, DpAttention included (each
#    group's logits against one GPU's, teacher-forced, bf16 tolerance);
#  - generate: aerie-generate under DP attention (plain, EAGLE3 chain, EAGLE3 tree) against
#    one GPU, 1B shape: how far the greedy paths agree in bf16;
#  - steps: aerie-serve (tiny shape) under DP attention with every rank's step log at debug
#    level, driven by aerie-bench serving (Poisson arrivals, random lengths, batches that grow
#    and shrink) for at least 10,000 lock-step steps: no hang, the same bucket on both ranks
#    at every step;
#  - throughput: 64 concurrent requests, 8B shape: DP attention vs TP2 vs two DP replicas;
#  - dp_replicas: tools/gpu_dp_check.sh (plain DP replicas against one process).
# Logs go to $OUT/logs.tgz; summaries are printed.
#   device run (kind nvidia-h200-x2, carry [".device.tgz"]): bash tools/gpu_dpa_check.sh [steps...]
set -uo pipefail
cd "$(dirname "$0")/.."
RESULTS=${OUT:-/tmp/aerie-gpu-dpa}
source tools/gpu_steps.sh
steps=${*:-tp_parity generate steps throughput dp_replicas}
MPI="mpirun --allow-run-as-root -np 2 -x NCCL_NVLS_ENABLE=0 -x LD_LIBRARY_PATH"
DPA=(--tp-size 2 --dp-size 2 --enable-dp-attention)
GEN=(--load-format dummy --model-shape llama-3.2-1b --device cuda --max-new-tokens 32 --temperature 0 --ignore-eos
     --max-total-tokens 65536 --output json)
for i in $(seq 1 24); do GEN+=(--input-ids "$(python3 -c "import random; r=random.Random($i); print(','.join(str(r.randrange(3,128000)) for _ in range(r.randint(1,300))))")"); done
serve_bench() {  # name, seconds, launcher, serve args, bench args
  step "$1" "$2" python3 tools/serve_and_bench.py --serve "$B/aerie-serve" --bench "$B/aerie-bench" --launcher "$3" \
    --serve-args "$4" --bench-args "$5 --output-file $LOGS/$1.json" --stderr "$LOGS/$1.server.txt"
}
for s in $steps; do
  case $s in
    tp_parity) step tp_parity 300 $MPI "$B/tp_parity_test" --device cuda --gtest_brief=1;;
    generate)
      step gen_one 240 "$B/aerie-generate" "${GEN[@]}"
      grep '^{' "$LOGS/gen_one.txt" > "$LOGS/one.jsonl"
      for spec in plain EAGLE3 EAGLE3_tree; do
        extra=()
        [[ $spec == EAGLE3 ]] && extra=(--speculative-algorithm EAGLE3)
        [[ $spec == EAGLE3_tree ]] && extra=(--speculative-algorithm EAGLE3 --speculative-eagle-topk 4 --speculative-num-draft-tokens 8)
        step gen_dpa_$spec 240 $MPI "$B/aerie-generate" "${GEN[@]}" "${DPA[@]}" "${extra[@]}"
        grep '^{' "$LOGS/gen_dpa_$spec.txt" > "$LOGS/dpa_$spec.jsonl"
        compare "$LOGS/one.jsonl" "$LOGS/dpa_$spec.jsonl" | tee -a "$LOGS/generate_summary.txt"
      done;;
    steps)
      serve_bench steps 420 "$MPI" "--load-format dummy --model-shape tiny --device cuda --max-total-tokens 16384 ${DPA[*]} --log-level debug" \
        "--num-prompts 3000 --random-input-len 64 --random-output-len 128 --random-range-ratio 0.1 --request-rate 400 --max-concurrency 16"
      python3 - "$LOGS/steps.server.txt" <<'PY' | tee "$LOGS/steps_summary.txt"
import collections, re, sys
log = open(sys.argv[1]).read()
per_rank = collections.defaultdict(dict)
for m in re.finditer(r"rank (\d+): DP step (\d+) bucket (\d+) padding (\w+) tokens (\d+)", log):
    per_rank[int(m.group(1))][int(m.group(2))] = (int(m.group(3)), m.group(4))
assert sorted(per_rank) == [0, 1], f"step logs from ranks {sorted(per_rank)}"
a, b = per_rank[0], per_rank[1]
differ = [s for s in a if a[s] != b.get(s)]
buckets = collections.Counter(v[0] for v in a.values())
print(f"DP attention on 2 GPUs: {len(a)} lock-step steps on rank 0, {len(b)} on rank 1, bucket differs at {len(differ)} steps; "
      f"{sum(1 for v in a.values() if v[0] > 0)} padded to a bucket ({len(buckets) - (1 if 0 in buckets else 0)} distinct buckets), "
      f"{sum(1 for v in a.values() if v[1] == 'SUM_LEN')} SUM_LEN")
assert len(a) >= 10000 and a.keys() == b.keys() and not differ, "fewer than 10,000 steps, or the ranks disagree"
PY
      [[ ${PIPESTATUS[0]} -eq 0 ]] || status=1;;
    throughput)
      BIG="--load-format dummy --model-shape llama-3.1-8b --device cuda --max-total-tokens 200000 --max-running-requests 64"
      LOAD="--num-prompts 320 --random-input-len 512 --random-output-len 256 --random-range-ratio 0.5 --max-concurrency 64"
      serve_bench tput_dpa 420 "$MPI" "$BIG ${DPA[*]}" "$LOAD"
      serve_bench tput_tp2 420 "$MPI" "$BIG --tp-size 2" "$LOAD"
      serve_bench tput_dp2 420 "$MPI" "$BIG --dp-size 2" "$LOAD"
      python3 - "$LOGS" <<'PY' | tee "$LOGS/throughput_summary.txt"
import json, os, sys
rows = []
for name, what in (("tput_dpa", "DP attention (TP2, DP2)"), ("tput_tp2", "TP2"), ("tput_dp2", "two DP replicas")):
    p = os.path.join(sys.argv[1], name + ".json")
    if not os.path.exists(p):
        print(f"{what}: no result"); continue
    r = json.load(open(p))
    rows.append((what, r))
print("8B shape, bf16, 320 requests (input 256-512, output 128-256 tokens), 64 concurrent, 2 x H200")
print(f"{'layout':<26} {'out tok/s':>10} {'req/s':>7} {'mean TTFT ms':>13} {'mean TPOT ms':>13} {'completed':>9}")
for what, r in rows:
    print(f"{what:<26} {r.get('output_throughput', 0):>10.0f} {r.get('request_throughput', 0):>7.2f} {r.get('mean_ttft_ms', 0):>13.1f} "
          f"{r.get('mean_tpot_ms', 0):>13.2f} {r.get('completed', 0):>9}")
PY
      ;;
    dp_replicas) step dp_replicas 300 bash tools/gpu_dp_check.sh;;
  esac
done
cp "$LOGS"/*summary.txt "$RESULTS/" 2>/dev/null
pack_logs
exit $status
