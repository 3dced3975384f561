#!/usr/bin/env python3
"""The peer beside `aerie-bench one-batch`: a gpt-fast-style Llama in plain PyTorch (static KV
cache, SDPA, the decode step under torch.compile(mode="reduce-overhead", fullgraph=True) -- what
gpt-fast publishes its numbers with), seeded random weights at Aerie's named shapes, batch
sizes as given. Prints one JSON line per batch size: prefill and decode tokens per second.

  bench_torch_compiled.py --model-shape llama-3.1-8b --batch-size 1 8 32 [--input-len 512]
        [--output-len 32] [--dtype bfloat16] [--device cuda] [--no-compile]
  bench_torch_compiled.py --check    # the same module against transformers' Llama (CPU, tiny)
"""
import argparse
import json
import statistics
import sys
import time

try:
    import torch
    import torch.nn.functional as F
    from torch import nn
except ImportError:
    if "--check" in sys.argv:  # a test where torch is not installed: skipped (ctest SKIP_RETURN_CODE)
        print("torch is not installed: skipping the peer's parity check")
        raise SystemExit(77)
    raise

SHAPES = {
    # vocab, hidden, intermediate, layers, heads, kv heads, head dim, rope theta, tied
    "tiny": (512, 64, 128, 2, 4, 2, 16, 10000.0, False),
    "llama-3.2-1b": (128256, 2048, 8192, 16, 32, 8, 64, 500000.0, True),
    "llama-3.1-8b": (128256, 4096, 14336, 32, 32, 8, 128, 500000.0, False),
}


class Attention(nn.Module):
    def __init__(self, hidden, heads, kv_heads, head_dim):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, head_dim
        self.wqkv = nn.Linear(hidden, (heads + 2 * kv_heads) * head_dim, bias=False)
        self.wo = nn.Linear(heads * head_dim, hidden, bias=False)
        # Buffers (as gpt-fast's KVCache): static addresses, so the compiled step's CUDA graph
        # may update them in place.
        self.register_buffer("k_cache", None, persistent=False)
        self.register_buffer("v_cache", None, persistent=False)

    def forward(self, x, cos, sin, pos, mask):
        b, t, _ = x.shape
        q, k, v = self.wqkv(x).split([self.heads * self.head_dim, self.kv_heads * self.head_dim, self.kv_heads * self.head_dim], -1)
        q = rope(q.view(b, t, self.heads, self.head_dim), cos, sin).transpose(1, 2)
        k = rope(k.view(b, t, self.kv_heads, self.head_dim), cos, sin).transpose(1, 2)
        v = v.view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        self.k_cache.index_copy_(2, pos, k)
        self.v_cache.index_copy_(2, pos, v)
        rep = self.heads // self.kv_heads
        keys = self.k_cache.repeat_interleave(rep, dim=1)
        values = self.v_cache.repeat_interleave(rep, dim=1)
        y = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask)
        return self.wo(y.transpose(1, 2).reshape(b, t, self.heads * self.head_dim))


def rope(x, cos, sin):  # rotate-half (Hugging Face's layout), cos/sin [t, head_dim]
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos[None, :, None, :] + rotated * sin[None, :, None, :]


class Block(nn.Module):
    def __init__(self, hidden, inter, heads, kv_heads, head_dim):
        super().__init__()
        self.attn = Attention(hidden, heads, kv_heads, head_dim)
        self.w13 = nn.Linear(hidden, 2 * inter, bias=False)
        self.w2 = nn.Linear(inter, hidden, bias=False)
        self.norm1 = nn.RMSNorm(hidden, eps=1e-5)
        self.norm2 = nn.RMSNorm(hidden, eps=1e-5)

    def forward(self, x, cos, sin, pos, mask):
        x = x + self.attn(self.norm1(x), cos, sin, pos, mask)
        gate, up = self.w13(self.norm2(x)).chunk(2, dim=-1)
        return x + self.w2(F.silu(gate) * up)


class Llama(nn.Module):
    def __init__(self, shape):
        super().__init__()
        vocab, hidden, inter, layers, heads, kv, hd, theta, tied = SHAPES[shape]
        self.tok = nn.Embedding(vocab, hidden)
        self.blocks = nn.ModuleList(Block(hidden, inter, heads, kv, hd) for _ in range(layers))
        self.norm = nn.RMSNorm(hidden, eps=1e-5)
        self.out = nn.Linear(hidden, vocab, bias=False)
        if tied:
            self.out.weight = self.tok.weight
        self.kv, self.hd, self.theta = kv, hd, theta

    def setup_cache(self, batch, max_len, dtype, device):
        for blk in self.blocks:
            blk.attn.k_cache = torch.zeros(batch, self.kv, max_len, self.hd, dtype=dtype, device=device)
            blk.attn.v_cache = torch.zeros(batch, self.kv, max_len, self.hd, dtype=dtype, device=device)
        inv = 1.0 / (self.theta ** (torch.arange(0, self.hd, 2, device=device).float() / self.hd))
        ang = torch.outer(torch.arange(max_len, device=device).float(), inv)
        emb = torch.cat([ang, ang], dim=-1)
        self.register_buffer("cos", emb.cos().to(dtype), persistent=False)
        self.register_buffer("sin", emb.sin().to(dtype), persistent=False)
        self.register_buffer("causal", torch.tril(torch.ones(max_len, max_len, dtype=torch.bool, device=device)), persistent=False)

    def forward(self, ids, pos):
        x = self.tok(ids)
        cos, sin, mask = self.cos[pos], self.sin[pos], self.causal[pos][None, None]
        for blk in self.blocks:
            x = blk(x, cos, sin, pos, mask)
        return self.out(self.norm(x))


def check():
    """The module against transformers' LlamaForCausalLM with the same weights (CPU, fp32)."""
    try:
        from transformers import LlamaConfig, LlamaForCausalLM
    except ImportError as e:
        print(f"SKIP: transformers unavailable ({e})")
        raise SystemExit(77)
    vocab, hidden, inter, layers, heads, kv, hd, theta, _ = SHAPES["tiny"]
    torch.manual_seed(0)
    ref = LlamaForCausalLM(LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=inter, num_hidden_layers=layers,
                                       num_attention_heads=heads, num_key_value_heads=kv, head_dim=hd, rope_theta=theta,
                                       rms_norm_eps=1e-5, tie_word_embeddings=False)).eval()
    ours = Llama("tiny").eval()
    sd = ref.state_dict()
    with torch.no_grad():
        ours.tok.weight.copy_(sd["model.embed_tokens.weight"])
        ours.out.weight.copy_(sd["lm_head.weight"])
        ours.norm.weight.copy_(sd["model.norm.weight"])
        for i, blk in enumerate(ours.blocks):
            p = f"model.layers.{i}."
            blk.attn.wqkv.weight.copy_(torch.cat([sd[p + "self_attn.q_proj.weight"], sd[p + "self_attn.k_proj.weight"],
                                                  sd[p + "self_attn.v_proj.weight"]]))
            blk.attn.wo.weight.copy_(sd[p + "self_attn.o_proj.weight"])
            blk.w13.weight.copy_(torch.cat([sd[p + "mlp.gate_proj.weight"], sd[p + "mlp.up_proj.weight"]]))
            blk.w2.weight.copy_(sd[p + "mlp.down_proj.weight"])
            blk.norm1.weight.copy_(sd[p + "input_layernorm.weight"])
            blk.norm2.weight.copy_(sd[p + "post_attention_layernorm.weight"])
    ids = torch.randint(0, vocab, (2, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want = ref(ids).logits
        ours.setup_cache(2, 16, torch.float32, "cpu")
        got = torch.cat([ours(ids[:, :9], torch.arange(9)), ours(ids[:, 9:10], torch.tensor([9])),
                         ours(ids[:, 10:], torch.tensor([10, 11]))], dim=1)  # prefill, one decode step, a 2-token extend
    err = (got - want).abs().max().item() / want.abs().max().item()
    print(json.dumps({"check": "torch peer vs transformers Llama", "max_rel_error": err}))
    if not err < 1e-5:
        raise SystemExit(f"FAIL: the peer differs from transformers' Llama (max relative error {err:.3g})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model-shape", default="llama-3.1-8b", choices=sorted(SHAPES))
    ap.add_argument("--batch-size", type=int, nargs="+", default=[1, 8, 32])
    ap.add_argument("--input-len", type=int, default=512)
    ap.add_argument("--output-len", type=int, default=32)
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    if args.check:
        return check()
    dtype, dev = getattr(torch, args.dtype), args.device
    torch.manual_seed(0)
    with torch.device(dev):
        model = Llama(args.model_shape).to(dtype).eval()
    for prm in model.parameters():
        prm.data.normal_(0.0, 0.02)
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    for batch in args.batch_size:
        max_len = args.input_len + args.output_len + 8
        model.setup_cache(batch, max_len, dtype, dev)
        step = model.forward if args.no_compile else torch.compile(model.forward, mode="reduce-overhead", fullgraph=True)
        ids = torch.randint(0, min(1000, SHAPES[args.model_shape][0]), (batch, args.input_len), device=dev)
        with torch.no_grad():
            model(ids, torch.arange(args.input_len, device=dev))  # warm-up (library handles, kernels)
            sync()
            t0 = time.perf_counter()
            logits = model(ids, torch.arange(args.input_len, device=dev))  # prefill eager (SDPA), as gpt-fast
            sync()
            prefill_ms = (time.perf_counter() - t0) * 1e3
            tok = logits[:, -1:].argmax(-1)
            times = []
            for s in range(args.output_len):
                pos = torch.tensor([args.input_len + s], device=dev)
                t0 = time.perf_counter()
                tok = step(tok, pos)[:, -1:].argmax(-1)
                sync()
                if s >= 3:  # the first calls compile and record the graph
                    times.append((time.perf_counter() - t0) * 1e3)
        step_ms = statistics.median(times)
        print(json.dumps({"peer": "torch.compile gpt-fast-style", "model_shape": args.model_shape, "dtype": args.dtype,
                          "compiled": not args.no_compile, "batch_size": batch, "input_len": args.input_len,
                          "prefill_ms": prefill_ms, "prefill_tok_s": batch * args.input_len / prefill_ms * 1e3,
                          "decode_step_ms": step_ms, "decode_tok_s": batch / step_ms * 1e3, "torch": torch.__version__}), flush=True)
        torch._dynamo.reset()


if __name__ == "__main__":
    main()
