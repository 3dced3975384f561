#!/usr/bin/env python3
"""Decode speed of Hugging Face transformers on a model, the baseline beside
`aerie-bench one-batch` in docs/performance.md: batch 1, a prompt of --input-len tokens, then
--output-len greedy tokens (EOS ignored) with the KV cache; prefill timed as one forward,
decode as the per-token time of the rest. Median of --repeats runs.

  bench_hf_decode.py --model FILE.gguf|DIR [--device cpu|cuda] [--dtype float32|bfloat16]
"""
import argparse
import json
import os
import statistics
import time

import torch
from transformers import AutoModelForCausalLM


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--input-len", type=int, default=64)
    ap.add_argument("--output-len", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    dtype = getattr(torch, args.dtype)
    if args.model.endswith(".gguf"):
        model = AutoModelForCausalLM.from_pretrained(os.path.dirname(args.model), gguf_file=os.path.basename(args.model), dtype=dtype)
    else:
        model = AutoModelForCausalLM.from_pretrained(args.model, dtype=dtype)
    model = model.to(args.device).eval()
    ids = torch.randint(100, model.config.vocab_size - 100, (1, args.input_len), generator=torch.Generator().manual_seed(0)).to(args.device)

    def sync():
        if args.device == "cuda":
            torch.cuda.synchronize()

    prefill, decode = [], []
    with torch.no_grad():
        for r in range(args.repeats + 1):
            sync()
            t0 = time.perf_counter()
            model(ids)
            sync()
            t1 = time.perf_counter()
            model.generate(ids, max_new_tokens=args.output_len, min_new_tokens=args.output_len, do_sample=False)
            sync()
            t2 = time.perf_counter()
            if r == 0:
                continue  # warm-up
            prefill.append((t1 - t0) * 1e3)
            decode.append(((t2 - t1) * 1e3 - (t1 - t0) * 1e3) / (args.output_len - 1))
    out = {"model": args.model, "device": args.device, "dtype": args.dtype, "threads": torch.get_num_threads(),
           "input_len": args.input_len, "output_len": args.output_len, "prefill_ms": statistics.median(prefill),
           "decode_ms_per_token": statistics.median(decode)}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
