# Sourced by tools/gpu_spec_check.sh and tools/gpu_verify_tune.sh on the GPU machine (with
# .device/ from tools/device_pack.sh carried along): the binaries' environment, a log folder
# $LOGS under $RESULTS (the caller sets RESULTS), and step(), which runs one command with a
# time limit into $LOGS/<name>.txt, prints its last `STEP_TAIL` lines (default 20) and
# records a failure in $status. pack_logs puts $LOGS into $RESULTS/logs.tgz: one file, since
# the device tool brings back only a few. compare() says how far two aerie-generate JSON-lines
# outputs agree (bf16 runs of different layouts part at near-ties). smollm2_eval runs the real
# model's speculative evaluation. overlap_tokens_check compares greedy tokens with overlap on and off.
cd "$(dirname "${BASH_SOURCE[0]}")/.."
LOGS=$RESULTS/logs
mkdir -p "$LOGS"
export NCCL_NVLS_ENABLE=0
# tools/device_pack.sh's bundle, unpacked again when a newer one came (a warm machine keeps the old .device/).
[[ -d .device && .device -nt .device.tgz ]] || { rm -rf .device && tar xzf .device.tgz && touch .device; }
export LD_LIBRARY_PATH=$PWD/.device/lib:${LD_LIBRARY_PATH:-}
B=$PWD/.device/bin
status=0
nvidia-smi --query-gpu=name,memory.total --format=csv
step() {  # name, seconds, command... (environment assignments go through `env`)
  local name=$1 secs=$2
  shift 2
  echo "== $name"
  local t0=$SECONDS
  timeout "$secs" "$@" > "$LOGS/$name.txt" 2>&1
  local rc=$?
  echo "   ($((SECONDS - t0)) s, rc $rc)"
  tail -n "${STEP_TAIL:-20}" "$LOGS/$name.txt"
  [[ $rc -eq 0 ]] || { echo "$name FAILED ($rc)"; status=1; }
}
compare() {  # two JSON-lines outputs: how far the greedy paths agree
  python3 - "$@" <<'PY'
import json, sys
a = [json.loads(l)["output_ids"] for l in open(sys.argv[1])]
b = [json.loads(l)["output_ids"] for l in open(sys.argv[2])]
assert len(a) == len(b), (len(a), len(b))
prefix = [next((i for i, (p, q) in enumerate(zip(x, y)) if p != q), len(x)) for x, y in zip(a, b)]
print(f"{sys.argv[2]}: {sum(x == y for x, y in zip(a, b))}/{len(a)} outputs identical to {sys.argv[1]}, "
      f"first token equal in {sum(x[0] == y[0] for x, y in zip(a, b))}/{len(a)}, mean common prefix {sum(prefix)/len(a):.1f}/{len(a[0])}")
PY
}
smollm2_eval() {  # json name [eval_spec.py flags]: SmolLM2 + the trained EAGLE-3 head against plain decoding
  # (eval_spec.py), when .device_model/ holds the GGUF's parts and their sha256 (tools/device_model_gguf.sh says how)
  local name=$1
  shift
  compgen -G ".device_model/smollm2.gguf*part_*" >/dev/null || return 0
  local M
  M=$(bash tools/device_model_gguf.sh) || { status=1; return; }
  step eval 420 python3 tools/train_eagle3/eval_spec.py --generate "$B/aerie-generate" --model "$M" --head assets/smollm2-eagle3 \
    --device cuda --dtype bf16 --prompts 16 --max-new 128 --batch-size 1 8 --json "$RESULTS/$name" "$@"
}
overlap_tokens_check() {  # greedy tokens with overlap scheduling on and off (aerie-generate, 1B shape, 32 prompts)
  local args=(--load-format dummy --model-shape llama-3.2-1b --device cuda --max-new-tokens 32 --temperature 0 --ignore-eos
              --max-total-tokens 65536 --output json)
  for i in $(seq 1 32); do args+=(--input-ids "$(python3 -c "import random; r=random.Random($i); print(','.join(str(r.randrange(3,128000)) for _ in range(r.randint(1,200))))")"); done
  timeout 120 "$B/aerie-generate" "${args[@]}" > "$RESULTS/overlap_on.jsonl" 2> "$LOGS/overlap_on.txt" || status=1
  timeout 120 "$B/aerie-generate" "${args[@]}" --disable-overlap-schedule > "$RESULTS/overlap_off.jsonl" 2> "$LOGS/overlap_off.txt" || status=1
  compare "$RESULTS/overlap_off.jsonl" "$RESULTS/overlap_on.jsonl"
}
# aerie-bench's speculative round at SmolLM2-135M's shape (random weights, an EAGLE-3 head over 16,384
# draft tokens, the chain runner in-process), 300 rounds; callers add --batch-size,
# --speculative-num-steps and --json (tools/gpu_verify_cost_check.sh, tools/gpu_spec_build_ab.sh).
SMOLLM2_SPEC_ROUND=(speculative --device cuda --model-shape smollm2-135m --algorithm EAGLE3 --draft-vocab 16384 --input-len 64
                    --rounds 300 --no-draft-actor --draft-chain runner)
pack_logs() {
  tar czf "$RESULTS/logs.tgz" -C "$RESULTS" logs && rm -rf "$LOGS"
}
