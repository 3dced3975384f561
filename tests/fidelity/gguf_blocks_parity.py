#!/usr/bin/env python3
"""A GGUF model's quantized blocks read in place on the CPU (kernels/weight_blocks.hpp) give the
same greedy tokens as the f32 copies alone (AERIE_CPU_GGUF_BLOCKS=0), for every format Aerie reads
blocks of and for batches that take each path of the small-batch kernel (1-8 rows: blocks decoded
in registers; 9-16: decoded once into f32 rows). Tiny random Llama GGUF files written by the gguf
package (llama.cpp's reference writer):

  * all Q4_1 projections, a Q8_0 embedding tied to the LM head (the embedded default's layout):
    every product keeps its blocks;
  * mixed types: q Q4_0 with k Q8_0 (a merged q/k/v of two formats keeps none), an F16 o_proj
    (none), Q4_1 gate/up, a Q8_0 down, an F32 embedding and a Q4_0 untied LM head.

The loader's log says how many products kept blocks; the test checks that count too.

With int8 activations (AERIE_CPU_INT8_ACTIVATIONS=1, kernels/cpu/int8_block_gemm.hpp: the blocks in
tile order, x rounded to 8 bits a block, llama.cpp's numbers) a prompt's greedy tokens must not
depend on the batch it runs in (each prompt of a batch of 12 alone gives the same tokens), and its
first token must mostly agree with the f32 model's (x's rounding moves logits by ~0.4%).

  gguf_blocks_parity.py --generate BIN/aerie-generate
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import gguf
    from gguf import GGMLQuantizationType as Q
except Exception as e:  # noqa: BLE001
    print(f"SKIP: the gguf package is unavailable ({e})")
    sys.exit(77)

HIDDEN, HEADS, KV_HEADS, INTER, LAYERS, VOCAB = 64, 4, 2, 128, 2, 96
HEAD_DIM = HIDDEN // HEADS


def tensor(w, name, data, qt):
    if qt == Q.F32:
        w.add_tensor(name, data.astype(np.float32))
    elif qt == Q.F16:
        w.add_tensor(name, data.astype(np.float16))
    else:
        raw = gguf.quants.quantize(data.astype(np.float32), qt)
        w.add_tensor(name, raw, raw_dtype=qt)


def write_model(path, types, seed):
    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(path, "llama")
    w.add_block_count(LAYERS)
    w.add_context_length(256)
    w.add_embedding_length(HIDDEN)
    w.add_feed_forward_length(INTER)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    w.add_uint32("tokenizer.ggml.eos_token_id", VOCAB + 1)  # never sampled: every output runs its length

    def rand(rows, cols, std=0.3):
        return rng.standard_normal((rows, cols)) * std

    tensor(w, "token_embd.weight", rand(VOCAB, HIDDEN, 1.0), types["embed"])
    for l in range(LAYERS):
        p = f"blk.{l}."
        w.add_tensor(p + "attn_norm.weight", (1.0 + 0.1 * rng.standard_normal(HIDDEN)).astype(np.float32))
        w.add_tensor(p + "ffn_norm.weight", (1.0 + 0.1 * rng.standard_normal(HIDDEN)).astype(np.float32))
        tensor(w, p + "attn_q.weight", rand(HEADS * HEAD_DIM, HIDDEN), types["q"])
        tensor(w, p + "attn_k.weight", rand(KV_HEADS * HEAD_DIM, HIDDEN), types["k"])
        tensor(w, p + "attn_v.weight", rand(KV_HEADS * HEAD_DIM, HIDDEN), types["v"])
        tensor(w, p + "attn_output.weight", rand(HIDDEN, HEADS * HEAD_DIM), types["o"])
        tensor(w, p + "ffn_gate.weight", rand(INTER, HIDDEN), types["gate_up"])
        tensor(w, p + "ffn_up.weight", rand(INTER, HIDDEN), types["gate_up"])
        tensor(w, p + "ffn_down.weight", rand(HIDDEN, INTER), types["down"])
    w.add_tensor("output_norm.weight", np.ones(HIDDEN, dtype=np.float32))
    if types.get("lm_head") is not None:
        tensor(w, "output.weight", rand(VOCAB, HIDDEN, 1.0), types["lm_head"])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def generate(binary, path, prompts, blocks, int8="0"):
    cmd = [binary, "--model-path", path, "--temperature", "0", "--max-new-tokens", "12", "--output", "json",
           "--log-level", "info"]
    for p in prompts:
        cmd += ["--input-ids", ",".join(map(str, p))]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=dict(os.environ, AERIE_CPU_GGUF_BLOCKS=blocks, AERIE_CPU_INT8_ACTIVATIONS=int8))
    assert out.returncode == 0, out.stderr[-2000:]
    ids = [json.loads(line)["output_ids"] for line in out.stdout.splitlines()]
    assert len(ids) == len(prompts) and all(len(i) == 12 for i in ids), out.stdout[-1000:]
    kept = re.search(r"GGUF blocks kept for (\d+) of (\d+) products", out.stderr)
    assert (int8 == "1") == ("tile order" in out.stderr), f"the loader's log does not say whether blocks are in tile order: {out.stderr[-1000:]}"
    return ids, (int(kept.group(1)), int(kept.group(2))) if kept else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--generate", required=True)
    args = ap.parse_args()
    variants = {
        "Q4_1 layers, tied Q8_0 embedding": (
            {"embed": Q.Q8_0, "q": Q.Q4_1, "k": Q.Q4_1, "v": Q.Q4_1, "o": Q.Q4_1, "gate_up": Q.Q4_1, "down": Q.Q4_1},
            4 * LAYERS + 1),
        "mixed types, untied Q4_0 LM head": (
            {"embed": Q.F32, "q": Q.Q4_0, "k": Q.Q8_0, "v": Q.Q4_0, "o": Q.F16, "gate_up": Q.Q4_1, "down": Q.Q8_0, "lm_head": Q.Q4_0},
            2 * LAYERS + 1),  # gate/up and down a layer, and the LM head
    }
    rng = np.random.default_rng(7)
    with tempfile.TemporaryDirectory() as tmp:
        for i, (name, (types, want_kept)) in enumerate(variants.items()):
            path = os.path.join(tmp, f"model{i}.gguf")
            write_model(path, types, seed=100 + i)
            for batch in (1, 6, 12):  # one row; 3 + 3 decoded in registers; 12 rows decoded once
                prompts = [rng.integers(0, VOCAB, size=int(rng.integers(3, 20))).tolist() for _ in range(batch)]
                with_blocks, kept = generate(args.generate, path, prompts, "1")
                f32_only, none = generate(args.generate, path, prompts, "0")
                assert kept == (want_kept, 4 * LAYERS + 1), f"{name}: the loader kept blocks for {kept}, expected {want_kept}"
                assert none is None, f"{name}: AERIE_CPU_GGUF_BLOCKS=0 still kept blocks ({none})"
                assert with_blocks == f32_only, f"{name}, batch {batch}: blocks {with_blocks} != f32 copies {f32_only}"
            print(f"  {name}: blocks kept for {want_kept} products; batches 1, 6, 12: the same greedy tokens as the f32 copies")
            # int8 activations: the same tokens alone as in a batch of 12; first tokens mostly the f32 model's.
            in_batch, kept = generate(args.generate, path, prompts, "1", int8="1")
            assert kept == (want_kept, 4 * LAYERS + 1), f"{name}, int8: the loader kept blocks for {kept}"
            for p, tokens in zip(prompts, in_batch):
                alone, _ = generate(args.generate, path, [p], "1", int8="1")
                assert alone[0] == tokens, f"{name}, int8: prompt {p} alone {alone[0]} != in a batch of 12 {tokens}"
            first_same = sum(a[0] == b[0] for a, b in zip(in_batch, f32_only))
            assert first_same >= 10, f"{name}, int8: only {first_same} of 12 first tokens equal the f32 model's"
            print(f"  {name}, int8 activations: each prompt alone gives its batch-of-12 tokens; first tokens {first_same}/12 the f32 model's")
    print("gguf blocks parity: OK")


if __name__ == "__main__":
    main()
