#!/usr/bin/env python3
"""Decode speed of Hugging Face transformers on a model, the baseline beside
`aerie-bench one-batch` in docs/performance.md: batch 1, a prompt of --input-len tokens, then
--output-len greedy tokens (EOS ignored) with the KV cache; prefill timed as one forward,
decode as the per-token time of the rest. Median of --repeats runs.

  bench_hf_decode.py --model FILE.gguf|DIR [--device cpu|cuda] [--dtype float32|bfloat16] [--batch-size 1 8]

One JSON line per batch size; prefill_tok_per_s and decode_tok_per_s count every sequence.
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
    ap.add_argument("--batch-size", type=int, nargs="+", default=[1])
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
    for batch in args.batch_size:
        print(json.dumps(run_batch(model, args, batch)), flush=True)


def run_batch(model, args, batch):
    ids = torch.randint(100, model.config.vocab_size - 100, (batch, args.input_len),
                        generator=torch.Generator().manual_seed(0)).to(args.device)

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
            model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=args.output_len,
                           min_new_tokens=args.output_len, do_sample=False, pad_token_id=0)
            sync()
            t2 = time.perf_counter()
            if r == 0:
                continue  # warm-up
            prefill.append((t1 - t0) * 1e3)
            decode.append(((t2 - t1) * 1e3 - (t1 - t0) * 1e3) / (args.output_len - 1))
    prefill_ms, decode_ms = statistics.median(prefill), statistics.median(decode)
    return {"model": args.model, "device": args.device, "dtype": args.dtype, "threads": torch.get_num_threads(),
            "batch_size": batch, "input_len": args.input_len, "output_len": args.output_len,
            "prefill_ms": prefill_ms, "prefill_tok_per_s": batch * args.input_len / prefill_ms * 1e3,
            "decode_ms_per_token": decode_ms, "decode_tok_per_s": batch / decode_ms * 1e3}


if __name__ == "__main__":
    main()
