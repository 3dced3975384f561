#!/usr/bin/env bash
# Builds the libFuzzer harnesses (clang, ASan + UBSan) into BUILD_DIR and runs each for
# SECONDS, starting from seeds made here (valid requests, the chat templates of the fidelity
# tests, tokenizer text, a small GGUF and safetensors file). A crash, sanitizer report, leak,
# out-of-memory (2 GB) or an input slower than 10 s fails the run; the input is kept in
# BUILD_DIR/findings. Exit 77 (skip) without clang++.
#   tests/fuzz/run.sh BUILD_DIR [SECONDS]
set -euo pipefail
command -v clang++ >/dev/null || { echo "SKIP: clang++ is not installed (tools/setup.sh installs it)"; exit 77; }
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
B=$1
T=${2:-20}
cmake -S "$ROOT/tests/fuzz" -B "$B" -G Ninja -DCMAKE_CXX_COMPILER=clang++ >/dev/null
cmake --build "$B" >/dev/null
S=$B/seeds
rm -rf "$S" "$B/corpus" && mkdir -p "$S"/{frame,safetensors,gguf,request,tokenizer,jinja} "$B/findings"
printf '%s' '{"text": "Hello", "sampling_params": {"max_new_tokens": 8, "temperature": 0.5, "stop": ["\n"]}}' > "$S/request/1"
printf '%s' '{"input_ids": [1, 2, 3], "return_logprob": true, "top_logprobs_num": 2, "stream": true}' > "$S/request/2"
printf '%s' '{"model": "m", "prompt": "Once upon", "max_tokens": 5, "logprobs": 2, "stop": ["x"]}' > "$S/request/3"
printf '%s' '{"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": [{"type": "text", "text": "Hi"}]}], "max_tokens": 4}' > "$S/request/4"
cp "$ROOT"/tests/fidelity/chat_templates/*.jinja "$S/jinja/"
printf '%s' "Hello world, it's 2026! 12345  <|eot_id|> héllo 日本 😀" > "$S/tokenizer/1"
printf '%s' "the theab abab <tool> 3.14159" > "$S/tokenizer/2"
python3 - "$S" <<'PY' || true
import json, struct, sys
s = sys.argv[1]
header = json.dumps({"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}, "__metadata__": {"format": "pt"}}).encode()
open(f"{s}/safetensors/1", "wb").write(struct.pack("<Q", len(header)) + header + b"\0" * 16)
try:
    import numpy as np, gguf
    w = gguf.GGUFWriter(f"{s}/gguf/1", "llama")
    w.add_block_count(1); w.add_string("tokenizer.ggml.model", "gpt2"); w.add_string("tokenizer.ggml.pre", "smollm")
    w.add_array("tokenizer.ggml.tokens", ["a", "b", "ab", "<s>"]); w.add_array("tokenizer.ggml.merges", ["a b"])
    w.add_array("tokenizer.ggml.token_type", [1, 1, 1, 3])
    w.add_tensor("token_embd.weight", np.zeros((4, 32), dtype=np.float32))
    w.add_tensor("q", gguf.quants.quantize(np.ones((1, 32), dtype=np.float32), gguf.GGMLQuantizationType.Q4_1),
                 raw_dtype=gguf.GGMLQuantizationType.Q4_1)
    w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
except Exception as e:  # no gguf package: the fuzzer starts from nothing
    print(f"no GGUF seed ({e})")
PY
status=0
for h in frame safetensors gguf request tokenizer jinja; do
  mkdir -p "$B/corpus/$h"
  if "$B/fuzz_$h" -max_total_time="$T" -timeout=10 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
      -artifact_prefix="$B/findings/$h-" "$B/corpus/$h" "$S/$h" > "$B/fuzz_$h.log" 2>&1; then
    echo "fuzz_$h: $(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$B/fuzz_$h.log" | grep -o '[0-9]*$') inputs in ${T}s, no findings"
  else
    echo "fuzz_$h: FINDING (log $B/fuzz_$h.log, input in $B/findings)"
    tail -40 "$B/fuzz_$h.log"
    status=1
  fi
done
exit $status
