#!/usr/bin/env bash
# On a 2-GPU machine (device kind nvidia-h200-x2), with .device.tgz from tools/device_pack.sh
# carried along: tensor parallelism over NCCL.
#  - tp_parity: collectives (also inside a CUDA graph), sharded layers, models and EAGLE heads
#    on TP2 against one GPU, TP decode graphs against eager (tests/parallel/tp_parity_main.cpp);
#  - gpu_test: the single-GPU tests (the model code TP shares);
#  - parity: TP2 vs TP1 vs transformers fp32, teacher-forced, Llama-3.1-8B shape;
#  - generate: aerie-generate TP2 (plain, EAGLE3 chain, EAGLE3 tree) vs one GPU;
#  - spec: aerie-bench speculative at TP1, TP2 with the EAGLE3 head sharded and replicated;
#  - kernels: each op of a decode step at TP1 and at one TP2 rank's shapes;
#  - collectives: all-reduce time, NCCL against the IPC one-shot kernel, eager and in graphs;
#  - bench: aerie-bench one-batch, 8B shape, batch 1/8/32: TP1, TP2 (IPC all-reduce) and TP2
#    (NCCL only) in the same run.
# Logs and JSON go to $OUT/logs.tgz; a summary is printed.
#   device run (kind nvidia-h200-x2, carry [".device.tgz"]): bash tools/gpu_tp_check.sh [steps...]
set -uo pipefail
cd "$(dirname "$0")/.."
[[ -d .device ]] || tar xzf .device.tgz
RESULTS=${OUT:-/tmp/aerie-gpu-tp}
source tools/gpu_steps.sh
steps=${*:-tp_parity collectives bench spec kernels generate gpu_test parity}
MPI=(mpirun --allow-run-as-root -np 2 -x NCCL_NVLS_ENABLE=0 -x LD_LIBRARY_PATH)
GEN=(--load-format dummy --model-shape llama-3.1-8b --device cuda --max-new-tokens 32 --temperature 0 --ignore-eos
     --max-total-tokens 65536 --output json)
for i in $(seq 1 16); do GEN+=(--input-ids "$(python3 -c "import random; r=random.Random($i); print(','.join(str(r.randrange(3,128000)) for _ in range(r.randint(1,300))))")"); done
for s in $steps; do
  case $s in
    tp_parity) step tp_parity 300 "${MPI[@]}" "$B/tp_parity_test" --device cuda --gtest_brief=1;;
    gpu_test) step gpu_test 300 "$B/gpu_test" --gtest_brief=1;;
    generate)
      step gen_tp1 240 "$B/aerie-generate" "${GEN[@]}"
      grep '^{' "$LOGS/gen_tp1.txt" > "$LOGS/tp1.jsonl"
      for spec in plain EAGLE3 EAGLE3_tree; do
        extra=()
        [[ $spec == EAGLE3 ]] && extra=(--speculative-algorithm EAGLE3)
        [[ $spec == EAGLE3_tree ]] && extra=(--speculative-algorithm EAGLE3 --speculative-eagle-topk 4 --speculative-num-draft-tokens 8)
        step gen_tp2_$spec 240 "${MPI[@]}" "$B/aerie-generate" "${GEN[@]}" --tp-size 2 "${extra[@]}"
        grep '^{' "$LOGS/gen_tp2_$spec.txt" > "$LOGS/tp2_$spec.jsonl"
        compare "$LOGS/tp1.jsonl" "$LOGS/tp2_$spec.jsonl" | tee -a "$LOGS/generate_summary.txt"
      done;;
    kernels)  # each op of a decode step at one GPU's shapes: the whole model, and one TP2 rank's shard
      step kernels_tp1 120 "$B/aerie-bench" kernels --model-shape llama-3.1-8b --batch-size 1,8 --context 544
      step kernels_tp2 120 "$B/aerie-bench" kernels --model-shape llama-3.1-8b --batch-size 1,8 --context 544 --tp-size 2;;
    spec)  # a speculative round under TP: EAGLE3 head sharded like the target, or whole on every rank
      SPEC=(speculative --model-shape llama-3.1-8b --batch-size 1,8 --speculative-num-steps 3 --rounds 12)
      step spec_tp1 180 "$B/aerie-bench" "${SPEC[@]}" --algorithm EAGLE3,STANDALONE --json "$LOGS/spec_tp1.json"
      step spec_tp2 180 "${MPI[@]}" "$B/aerie-bench" "${SPEC[@]}" --tp-size 2 --algorithm EAGLE3,STANDALONE --json "$LOGS/spec_tp2.json"
      step spec_tp2_replicated 180 "${MPI[@]}" "$B/aerie-bench" "${SPEC[@]}" --tp-size 2 --algorithm EAGLE3 \
        --speculative-draft-tensor-parallel-size 1 --json "$LOGS/spec_tp2_replicated.json";;
    collectives) step collectives 120 "${MPI[@]}" "$B/aerie-bench" collectives --rows 1,2,4,8,16,32,64,128,256 --json "$LOGS/collectives.json";;
    bench)
      ONE=(one-batch --load-format dummy --model-shape llama-3.1-8b --batch-size 1,8,32 --input-len 512 --output-len 64 --cuda-graph on)
      step bench_tp1 240 "$B/aerie-bench" "${ONE[@]}" --json "$LOGS/bench_8b_tp1.json"
      step bench_tp2 240 "${MPI[@]}" "$B/aerie-bench" "${ONE[@]}" --tp-size 2 --json "$LOGS/bench_8b_tp2.json"
      step bench_tp2_nccl 240 "${MPI[@]}" "$B/aerie-bench" "${ONE[@]}" --tp-size 2 --disable-custom-all-reduce --json "$LOGS/bench_8b_tp2_nccl.json"
      python3 - "$LOGS/bench_8b_tp1.json" "$LOGS/bench_8b_tp2.json" "$LOGS/bench_8b_tp2_nccl.json" <<'PY' | tee "$LOGS/bench_summary.txt"
import json, sys
a, b, c = (json.load(open(p))["results"] for p in sys.argv[1:4])
print("8B shape, bf16, graphs on, 512-token prompts; TP2 %floor is one GPU's (its shard's bytes over its bandwidth)")
print(f"{'batch':>5} {'tp1_ms':>8} {'tp2_ms':>8} {'tp2/tp1':>8} {'tp2nccl_ms':>11} {'nccl/tp1':>9} {'tp1 %floor':>11} {'tp2 %floor':>11}")
for x, y, z in zip(a, b, c):
    print(f"{x['batch_size']:>5} {x['decode_step_ms']:>8.3f} {y['decode_step_ms']:>8.3f} {x['decode_step_ms']/y['decode_step_ms']:>7.2f}x "
          f"{z['decode_step_ms']:>11.3f} {x['decode_step_ms']/z['decode_step_ms']:>8.2f}x "
          f"{100*x['fraction_of_floor']:>10.1f}% {100*y['fraction_of_floor']:>10.1f}%")
PY
      ;;
    parity)
      step parity 420 python3 tests/fidelity/gpu_parity.py --generate "$B/aerie-generate" --dump-logits "$B/aerie-dump-logits" \
        --shapes llama-3.1-8b --tp 2 --out "$LOGS/parity_tp2.json" --workdir /tmp;;
  esac
done
cp "$LOGS"/*summary.txt "$RESULTS/" 2>/dev/null
pack_logs
exit $status
