#!/usr/bin/env python3
"""Trains an EAGLE-3 draft head for SmolLM2-135M-Instruct on the target's own answers, and writes
it in sglang's EAGLE-3 format (what `--speculative-algorithm EAGLE3
--speculative-draft-model-path DIR` loads): config.json + model.safetensors with fc,
midlayer.*, norm, lm_head over a reduced draft vocabulary, and d2t.

Recipe (EAGLE-3): the head reads the target's hidden states entering layers 2, 15 and 27
(Aerie's default aux layers for 30 layers; sglang's eagle_aux_hidden_state_layer_ids 1, 14, 26)
through fc, and the embedding of the next token; it learns the target's greedy next token, or with
--soft-labels the target's probabilities over the draft vocabulary (EAGLE-3's and SpecForge's loss).
Training-time test: after the first step, each further step feeds the head its own output
hidden state, attending to the true states' keys up to the chain's start and to the chain's
own earlier keys, exactly as Aerie's draft steps do at inference.

Data: prompts from prompts.py (held-out topics never used), and with --texts prompts on
quotations and words from Debian's fortunes and wamerican (texts.py, fetch_texts.sh), each
answered by the target at each --temperatures (greedy and sampled), through its chat template:
by transformers' generate, or with --answers-by by Aerie's own engine (aerie-generate; in float32
the same greedy answers, tests/train_eagle3/aerie_answers_test.py). --topic-word-prompts asks
prompts.py's request templates about words of the word list. --init-head goes on training a head;
--widen-intermediate N first grows its MLP to N units without changing what it computes (the
shipped head: 1,536 -> 4,608). Reproducible with --seed (the time budget may end training earlier
on a slower machine).

  PYTHONPATH=<gguf, accelerate> python3 train.py --model smollm2.gguf --out DIR [--steps-ttt 6]
"""
import argparse
import json
import math
import os
import random
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import prompts as prompt_sets  # noqa: E402
import texts as text_sets  # noqa: E402

AUX_LAYERS = (2, 15, 27)  # hidden_states[l] of transformers = the input of layer l


def load_target(path, device, dtype=torch.bfloat16):
    from tokenizers import pre_tokenizers
    from transformers import AutoModelForCausalLM, AutoTokenizer
    folder, name = os.path.dirname(path), os.path.basename(path)
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    # SmolLM2's own tokenizer splits digits first (transformers' GGUF import drops that step).
    tok.backend_tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=dtype).to(device).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return tok, model


@torch.no_grad()
def generate_answers(tok, model, prompts, device, max_new, batch, temperature, seed):
    """Prompt ids + the target's answer ids (ending at <|im_end|> when it ends), per prompt."""
    tok.padding_side = "left"
    out = []
    g = torch.Generator(device=device).manual_seed(seed)
    torch.manual_seed(seed)
    for b in range(0, len(prompts), batch):
        chunk = prompts[b:b + batch]
        ids = [chat_ids(tok, p) for p in chunk]
        width = max(len(x) for x in ids)
        pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        inp = torch.tensor([[pad] * (width - len(x)) + x for x in ids], device=device)
        mask = torch.tensor([[0] * (width - len(x)) + [1] * len(x) for x in ids], device=device)
        kw = dict(do_sample=False) if temperature == 0 else dict(do_sample=True, temperature=temperature, top_p=1.0, top_k=0)
        gen = model.generate(inp, attention_mask=mask, max_new_tokens=max_new, eos_token_id=tok.eos_token_id, pad_token_id=pad, **kw)
        for x, row in zip(ids, gen[:, width:].tolist()):
            if tok.eos_token_id in row:
                row = row[:row.index(tok.eos_token_id) + 1]
            out.append((x, row))
        print(f"  generated {min(b + batch, len(prompts))}/{len(prompts)} (T={temperature})", flush=True)
    del g
    return out


def chat_ids(tok, prompt):
    return tok.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=True, return_dict=False)


def generate_answers_aerie(tok, binary, model_path, prompts, device, dtype, max_new, temperature, seed, max_running=256):
    """generate_answers through Aerie's own engine (aerie-generate: continuous batching, CUDA graphs)
    instead of transformers' generate: the same chat-template ids in, the answer ids out, ending at
    the EOS the engine stops at (included, as generate_answers keeps it). In float32 on the CPU
    greedy answers equal transformers' token for token (tests/train_eagle3/aerie_answers_test.py).
    One --seed for all requests: each request's draws follow the target's distribution, though
    requests share their uniforms step by step."""
    import subprocess
    import tempfile
    ids = [chat_ids(tok, p) for p in prompts]
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("".join(",".join(map(str, x)) + "\n" for x in ids))
        id_file = f.name
    # KV for the requests in flight, not for all of them (the engine's default).
    pool = min(len(ids), max_running) * (max(len(x) for x in ids) + max_new + 1)
    cmd = [binary, "--model-path", model_path, "--device", device, "--dtype", dtype, "--input-ids-file", id_file,
           "--max-new-tokens", str(max_new), "--temperature", str(temperature), "--seed", str(seed),
           "--max-running-requests", str(max_running), "--max-total-tokens", str(pool)]
    try:
        run = subprocess.run(cmd, capture_output=True, text=True)
    finally:
        os.unlink(id_file)
    if run.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:3])} ... failed ({run.returncode}): {run.stderr[-2000:]}")
    lines = run.stdout.splitlines()
    if len(lines) != len(ids):
        raise RuntimeError(f"aerie-generate returned {len(lines)} answers for {len(ids)} prompts")
    summary = [ln for ln in run.stderr.splitlines() if ln.startswith("aerie-generate: ")]
    print(f"  generated {len(ids)} (T={temperature}) with {binary}: {summary[-1] if summary else ''}", flush=True)
    return [(x, json.loads(line)["output_ids"]) for x, line in zip(ids, lines)]


def rope(x, positions, theta):
    """Llama's rotary embedding (rotate_half layout) of x [B, heads, T, D] at positions [B, T]."""
    d = x.shape[-1]
    inv = 1.0 / (theta ** (torch.arange(0, d, 2, device=x.device, dtype=torch.float32) / d))
    ang = positions.float()[..., None] * inv  # [B, T, D/2]
    cos, sin = torch.cat([ang.cos()] * 2, -1)[:, None], torch.cat([ang.sin()] * 2, -1)[:, None]
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return (x.float() * cos + torch.cat([-x2, x1], -1).float() * sin).to(x.dtype)


class RMSNorm(torch.nn.Module):
    def __init__(self, h, eps):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(h))
        self.eps = eps

    def forward(self, x):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype) * self.weight.to(x.dtype)


class Eagle3Head(torch.nn.Module):
    def __init__(self, cfg, draft_vocab, intermediate=None):
        super().__init__()
        # The MLP's width is the head's own (config.json's intermediate_size, which sglang and
        # Aerie read from the head): the target's unless widened (--widen-intermediate).
        h, i = cfg.hidden_size, intermediate or cfg.intermediate_size
        self.intermediate = i
        self.nh, self.nkv, self.d = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.hidden_size // cfg.num_attention_heads
        self.theta = cfg.rope_parameters["rope_theta"] if hasattr(cfg, "rope_parameters") and cfg.rope_parameters else cfg.rope_theta
        eps = cfg.rms_norm_eps
        lin = lambda a, b: torch.nn.Linear(a, b, bias=False)  # noqa: E731
        self.fc = lin(3 * h, h)
        self.input_layernorm, self.hidden_norm = RMSNorm(h, eps), RMSNorm(h, eps)
        self.q_proj, self.k_proj, self.v_proj = lin(2 * h, self.nh * self.d), lin(2 * h, self.nkv * self.d), lin(2 * h, self.nkv * self.d)
        self.o_proj = lin(self.nh * self.d, h)
        self.post_attention_layernorm = RMSNorm(h, eps)
        self.gate_proj, self.up_proj, self.down_proj = lin(h, i), lin(h, i), lin(i, h)
        self.norm = RMSNorm(h, eps)
        self.lm_head = lin(h, draft_vocab)
        for m in self.modules():
            if isinstance(m, torch.nn.Linear):
                torch.nn.init.normal_(m.weight, std=0.02)

    def qkv(self, emb, hidden, positions):
        x = torch.cat([self.input_layernorm(emb), self.hidden_norm(hidden)], -1)
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.nh, self.d).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.nkv, self.d).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.nkv, self.d).transpose(1, 2)
        rep = self.nh // self.nkv
        return rope(q, positions, self.theta), rope(k, positions, self.theta).repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)

    def finish(self, hidden, attn):
        B, _, T, _ = attn.shape
        h = hidden + self.o_proj(attn.transpose(1, 2).reshape(B, T, -1))
        x = self.post_attention_layernorm(h)
        h = h + self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))
        return h, self.lm_head(self.norm(h))


# The head's weights under sglang's EAGLE-3 checkpoint names (what Aerie loads), by module.
HEAD_WEIGHTS = {
    "fc": "fc.weight", "norm": "norm.weight", "lm_head": "lm_head.weight",
    "input_layernorm": "midlayer.input_layernorm.weight", "hidden_norm": "midlayer.hidden_norm.weight",
    "q_proj": "midlayer.self_attn.q_proj.weight", "k_proj": "midlayer.self_attn.k_proj.weight",
    "v_proj": "midlayer.self_attn.v_proj.weight", "o_proj": "midlayer.self_attn.o_proj.weight",
    "post_attention_layernorm": "midlayer.post_attention_layernorm.weight",
    "gate_proj": "midlayer.mlp.gate_proj.weight", "up_proj": "midlayer.mlp.up_proj.weight", "down_proj": "midlayer.mlp.down_proj.weight",
}


def load_head(folder, cfg, device):
    """A head written by this script: the module and its draft-to-target ids."""
    from safetensors.torch import load_file
    sd = load_file(os.path.join(folder, "model.safetensors"))
    nv = sd["lm_head.weight"].shape[0]
    head = Eagle3Head(cfg, nv, intermediate=sd["midlayer.mlp.gate_proj.weight"].shape[0])
    head.load_state_dict({f"{module}.weight": sd[name].float() for module, name in HEAD_WEIGHTS.items()}, strict=True)
    draft_ids = sd["d2t"] + torch.arange(nv)
    return head.to(device), draft_ids.to(device)


@torch.no_grad()
def widen_mlp(head, width, seed):
    """The head with its MLP widened to `width` and the same function: the new gate/up rows are
    initialised as a new head's are (normal, std 0.02), the new down_proj columns are zero, so the
    new units add nothing until training moves them (Net2Net-style growth: more capacity for a
    head that underfits, without losing what its steps learned)."""
    old = head.intermediate
    if width <= old:
        raise ValueError(f"--widen-intermediate {width} must exceed the head's intermediate size {old}")
    g = torch.Generator(device="cpu").manual_seed(seed)
    dev = head.gate_proj.weight.device
    h = head.gate_proj.weight.shape[1]

    def grown(lin, rows=None, cols=None):
        w = lin.weight
        if rows is not None:
            extra = torch.randn(rows - w.shape[0], w.shape[1], generator=g) * 0.02
            w = torch.cat([w, extra.to(dev, w.dtype)], 0)
        if cols is not None:
            w = torch.cat([w, torch.zeros(w.shape[0], cols - w.shape[1], device=dev, dtype=w.dtype)], 1)
        out = torch.nn.Linear(w.shape[1], w.shape[0], bias=False).to(dev)
        out.weight.copy_(w)
        return out

    head.gate_proj, head.up_proj = grown(head.gate_proj, rows=width), grown(head.up_proj, rows=width)
    head.down_proj = grown(head.down_proj, cols=width)
    head.intermediate = width
    assert head.gate_proj.weight.shape == (width, h) and head.down_proj.weight.shape == (h, width)
    return head


def save_head(head, draft_ids, cfg, out):
    """The head in sglang's EAGLE-3 format (what Aerie's --speculative-draft-model-path loads):
    model.safetensors (bf16 weights, d2t, t2d) and config.json, whose intermediate_size is the
    head's own MLP width."""
    from safetensors.torch import save_file
    os.makedirs(out, exist_ok=True)
    nv, dev = draft_ids.numel(), draft_ids.device
    t2d = torch.full((cfg.vocab_size,), -1, dtype=torch.long, device=dev)
    t2d[draft_ids] = torch.arange(nv, device=dev)
    sd = {name: getattr(head, module).weight for module, name in HEAD_WEIGHTS.items()}
    sd = {k: v.detach().to(torch.bfloat16).contiguous().cpu() for k, v in sd.items()}
    sd["d2t"] = (draft_ids - torch.arange(nv, device=dev)).to(torch.int64).cpu()
    sd["t2d"] = (t2d >= 0).cpu()
    save_file(sd, os.path.join(out, "model.safetensors"))
    config = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_size": cfg.hidden_size,
              "intermediate_size": head.intermediate, "num_attention_heads": cfg.num_attention_heads,
              "num_key_value_heads": cfg.num_key_value_heads, "head_dim": cfg.hidden_size // cfg.num_attention_heads,
              "num_hidden_layers": 1, "vocab_size": cfg.vocab_size, "draft_vocab_size": nv, "rms_norm_eps": cfg.rms_norm_eps,
              "rope_theta": head.theta, "max_position_embeddings": cfg.max_position_embeddings, "hidden_act": "silu",
              "tie_word_embeddings": False, "torch_dtype": "bfloat16", "bos_token_id": cfg.bos_token_id,
              "eos_token_id": cfg.eos_token_id,
              "eagle_config": {"eagle_aux_hidden_state_layer_ids": [l - 1 for l in AUX_LAYERS]}}
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)


def batch_tensors(batch, pad_id, device):
    """Conversations (prompt ids, answer ids) padded into [B, T]: ids, valid (a real token), and
    loss_mask (positions whose next token is the answer's). Built on the host and copied in one
    go: a copy per row from pageable memory waits for the device each time."""
    T = max(len(p) + len(a) for p, a in batch)
    ids = torch.full((len(batch), T), pad_id, dtype=torch.long)
    valid = torch.zeros((len(batch), T), dtype=torch.bool)
    loss_mask = torch.zeros((len(batch), T), dtype=torch.bool)
    for r, (p, a) in enumerate(batch):
        ids[r, :len(p) + len(a)] = torch.tensor(p + a)
        valid[r, :len(p) + len(a)] = True
        loss_mask[r, len(p):len(p) + len(a)] = True
    if torch.device(device).type == "cuda":
        ids, valid, loss_mask = (t.pin_memory().to(device, non_blocking=True) for t in (ids, valid, loss_mask))
    return ids, valid, loss_mask


@torch.no_grad()
def target_features(tok, target, batch, device, draft_ids=None):
    """Conversations (prompt ids, answer ids) padded into one target forward: ids, valid,
    loss_mask (batch_tensors), the aux hidden states the head reads, the target's greedy token
    after each position, and (given the draft vocabulary's target ids) the target's probabilities
    of those tokens after each position (the soft labels of EAGLE-3's recipe; else None)."""
    ids, valid, loss_mask = batch_tensors(batch, tok.eos_token_id, device)
    o = target(input_ids=ids, attention_mask=valid.long(), output_hidden_states=True)
    aux = torch.cat([o.hidden_states[layer] for layer in AUX_LAYERS], -1)
    # Over the whole vocabulary, then the draft's columns: mass on tokens the head cannot draft is
    # left out (the head is not taught to move it elsewhere).
    probs = None if draft_ids is None else torch.softmax(o.logits.float(), -1)[..., draft_ids].to(torch.bfloat16)
    return ids, valid, loss_mask, aux, o.logits.argmax(-1), probs


def ttt_loss(outs, labels, loss_mask, valid, t2d, probs=None, decay=0.8):
    """The training-time test's loss: sum over steps k of decay^k x the mean over the positions
    step k is taught at (answer positions whose target token is in the draft vocabulary) of the
    cross-entropy against the target's greedy token, or with probs its probabilities over the
    draft vocabulary. Also, per step, how many of those positions the head's top-1 got right and
    how many there were (device tensors). Masks multiply instead of selecting rows, so nothing
    here waits for the device: selecting rows by a mask (and .item()) does, several times a step.
    outs: step k's logits [B, T, V]; step k at chain i predicts the target at i + 1 + k."""
    T = labels.shape[1]
    dev = labels.device
    correct, counted = [], []
    loss = torch.zeros((), device=dev)
    for k, logits in enumerate(outs):
        tgt_pos = torch.arange(T, device=dev) + 1 + k
        at = tgt_pos.clamp(max=T - 1)
        d = t2d[labels[:, at]]
        m = loss_mask[:, at] & (tgt_pos < T)[None] & valid & (d >= 0)
        mf = m.float()
        n = mf.sum()
        logp = F.log_softmax(logits.float(), -1)
        if probs is None:
            per = -logp.gather(-1, d.clamp(min=0)[..., None]).squeeze(-1)
        else:  # cross-entropy against the target's probabilities (a KL up to a constant)
            per = -(probs[:, at].float() * logp).sum(-1)
        loss = loss + (decay ** k) * (per * mf).sum() / n.clamp(min=1)
        correct.append(((logits.argmax(-1) == d) & m).sum())
        counted.append(n)
    return loss, torch.stack(correct).float(), torch.stack(counted)


def ttt_forward(head, embed, aux, ids, valid, steps):
    """Logits of every training-time-test step. aux [B, T, 3H], ids [B, T], valid [B, T].
    Step k, chain i: position i + k, token ids[i + 1 + k], predicts the target at i + 1 + k."""
    B, T, _ = aux.shape
    pos = torch.arange(T, device=aux.device)[None].expand(B, T)
    hidden = head.fc(aux)
    # Step 0: causal attention over the true states (Aerie's draft extend).
    emb = embed(torch.roll(ids, -1, 1))
    q, k0, v0 = head.qkv(emb, hidden, pos)
    causal = torch.ones(T, T, dtype=torch.bool, device=aux.device).tril()
    key_ok = causal[None, None] & valid[:, None, None, :]
    scale = 1.0 / math.sqrt(head.d)
    s0 = (q.float() @ k0.float().transpose(-1, -2)) * scale
    attn = torch.softmax(s0.masked_fill(~key_ok, -1e30), -1).to(v0.dtype) @ v0
    hidden, logits = head.finish(hidden, attn)
    out = [logits]
    ks, vs = [], []
    for k in range(1, steps):
        emb = embed(torch.roll(ids, -(1 + k), 1))
        q, kk, vv = head.qkv(emb, hidden, pos + k)
        ks.append(kk)
        vs.append(vv)
        s_true = (q.float() @ k0.float().transpose(-1, -2)) * scale  # chain i sees true keys j <= i
        s_own = torch.stack([(q.float() * kj.float()).sum(-1) * scale for kj in ks], -1)  # and its own steps
        s = torch.cat([s_true.masked_fill(~key_ok, -1e30), s_own], -1)
        p = torch.softmax(s, -1)
        attn = p[..., :T].to(v0.dtype) @ v0 + sum(p[..., T + j, None].to(v0.dtype) * vs[j] for j in range(len(vs)))
        hidden, logits = head.finish(hidden, attn)
        out.append(logits)
    return out


class TimedSchedule:
    """The learning rate of a run bounded by steps and by time: 50 warm-up steps, then a cosine that
    reaches zero where training ends: at `full_total` steps, or (re-estimated from the step rate
    every 200 steps) where `budget` seconds stop it. Shared by train.py and distill_draft.py."""

    def __init__(self, opt, full_total, budget):
        self.opt = opt
        self.total = self.full_total = full_total
        self.budget, self.step, self.rate = budget, 0, None
        self.started, self.t100 = time.time(), None
        self.sched = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda s: min(1.0, (s + 1) / 50) * 0.5 * (1 + math.cos(math.pi * min(1.0, s / self.total))))

    def update(self, loss, params):
        """One optimizer step on `loss` (gradients clipped to norm 1); True when training should stop."""
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        self.opt.step()
        return self.advance()

    def advance(self):
        """After an optimizer step; True when training should stop."""
        self.sched.step()
        self.step += 1
        if self.step == 100:
            self.t100 = time.time()  # the first steps are slower (allocator, autotuning): rates count from here
        if self.step > 100 and self.step % 200 == 0:
            self.rate = (self.step - 100) / (time.time() - self.t100)
            left = self.budget - (time.time() - self.started)
            self.total = min(self.full_total, self.step + int(self.rate * left * 0.98))
        return self.step >= self.total or time.time() - self.started > self.budget

    def why_stopped(self):
        return "the last epoch" if self.step >= self.full_total else "the time budget"


def add_run_args(ap, epochs, lr):
    """How long and how fast a trainer runs (train.py, distill_draft.py): its budget() bounds TimedSchedule."""
    ap.add_argument("--epochs", type=int, default=epochs)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=lr)
    ap.add_argument("--time-budget", type=float, default=330, help="seconds of training at most")
    ap.add_argument("--wall-budget", type=float, default=0,
                    help="seconds for the whole run (loading, answers, training, saving): training ends in time (0: no limit)")


def budget(args, t0):
    """Seconds of training left: --time-budget, or less where --wall-budget (counted from t0) ends
    the run first, with 30 s kept to save what was trained."""
    if not args.wall_budget:
        return args.time_budget
    return min(args.time_budget, args.wall_budget - (time.time() - t0) - 30)


def add_data_args(ap):
    """The options of the training conversations (training_conversations), shared with distill_draft.py."""
    ap.add_argument("--max-new", type=int, default=160)
    ap.add_argument("--gen-batch", type=int, default=512)
    ap.add_argument("--limit-prompts", type=int, default=0, help="use only this many training prompts (smoke test)")
    ap.add_argument("--extra-prompts", type=int, default=0, help="add this many prompts on qualified training topics")
    ap.add_argument("--temperatures", type=float, nargs="+", default=[0.0, 0.7], help="one answer per prompt at each")
    ap.add_argument("--texts", default="", help="folder from fetch_texts.sh: prompts on quotations and words too (texts.py)")
    ap.add_argument("--fortune-prompts", type=int, default=0, help="prompts on quotations from --texts")
    ap.add_argument("--word-prompts", type=int, default=0, help="prompts on words from --texts")
    ap.add_argument("--topic-word-prompts", type=int, default=0,
                    help="prompts of prompts.py's request templates on words from --texts as topics (thousands of topics, not ~160)")
    ap.add_argument("--data-cache", default="", help="JSON file of the generated answers: read when made with the same settings, else written")
    ap.add_argument("--data-only", action="store_true", help="generate (and cache) the answers, then stop")
    ap.add_argument("--answers-by", default="",
                    help="an aerie-generate binary: the target's answers come from Aerie's engine (bf16 on cuda, f32 on cpu) "
                         "instead of transformers' generate")
    ap.add_argument("--data-seed", type=int, default=None,
                    help="seed of the qualified and text prompts' picks and of the sampled answers (default: --seed); "
                         "the held-out topics stay --seed's, so a new data seed gives new training conversations only")


def check_data_args(ap, args):
    if not args.texts and (args.fortune_prompts or args.word_prompts or args.topic_word_prompts):
        ap.error("--fortune-prompts, --word-prompts and --topic-word-prompts need --texts (tools/train_eagle3/fetch_texts.sh)")


def training_conversations(args, tok, target, t0):
    """The training conversations (prompt ids, answer ids): prompts of the training topics (never a
    held-out one), with --texts also on quotations and words, each answered by the target at each
    --temperatures (transformers' generate, or Aerie's engine with --answers-by); read from
    --data-cache when it was made with the same settings. Returns (data, train_prompts,
    held_topics, data_seed)."""
    dev = args.device
    data_seed = args.seed if args.data_seed is None else args.data_seed
    train_topics, held_topics = prompt_sets.split(args.seed)
    train_prompts = prompt_sets.prompts(train_topics, args.seed + 1)
    if args.extra_prompts:  # qualified training topics ("tiny robots"): more variety, never a held-out topic
        extra = prompt_sets.with_qualifiers(train_topics, args.extra_prompts, data_seed + 3)
        rng = random.Random(data_seed + 4)
        train_prompts += [rng.choice(prompt_sets.TEMPLATES).format(t=t) for t in extra]
    if args.fortune_prompts or args.word_prompts:  # all three need --texts (checked above)
        train_prompts += text_sets.text_prompts(args.texts, args.fortune_prompts, args.word_prompts, held_topics, data_seed + 5)
    if args.topic_word_prompts:  # own seed: the prompts above stay those of earlier heads
        train_prompts += text_sets.word_topic_prompts(args.texts, args.topic_word_prompts, prompt_sets.TEMPLATES, held_topics,
                                                      data_seed + 7)
    if args.fortune_prompts or args.word_prompts or args.topic_word_prompts:
        random.Random(data_seed + 6).shuffle(train_prompts)  # every kind in a --limit-prompts sample
    if args.limit_prompts:
        train_prompts = train_prompts[: args.limit_prompts]
    # The answers take minutes to generate; --data-cache keeps them, so a later run (a second
    # device call on a warm machine) trains without generating them again.
    settings = {"seed": args.seed, "temperatures": args.temperatures, "max_new": args.max_new, "prompts": train_prompts}
    if data_seed != args.seed:
        settings["data_seed"] = data_seed
    if args.answers_by:
        settings["answers_by"] = "aerie-generate"
    cached = None
    if args.data_cache and os.path.exists(args.data_cache):
        with open(args.data_cache) as f:
            saved = json.load(f)
        if saved.get("settings") == settings:
            cached = [(p, a) for p, a in saved["data"]]
        else:
            print(f"{args.data_cache} was made with other settings: generating again", flush=True)
    if cached is not None:
        data = cached
    else:
        data = []
        for s, temp in enumerate(args.temperatures, start=1):
            if args.answers_by:
                data += generate_answers_aerie(tok, args.answers_by, args.model, train_prompts, dev, "bf16" if dev == "cuda" else "f32",
                                               args.max_new, temp, data_seed + s)
            else:
                data += generate_answers(tok, target, train_prompts, dev, args.max_new, args.gen_batch, temp, data_seed + s)
        if args.data_cache:
            with open(args.data_cache, "w") as f:
                json.dump({"settings": settings, "data": data}, f)
    print(f"data: {len(data)} conversations, {sum(len(a) for _, a in data)} answer tokens "
          f"({'from ' + args.data_cache if cached is not None else 'generated'}, {time.time() - t0:.0f} s)", flush=True)
    return data, train_prompts, held_topics, data_seed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cuda")
    add_data_args(ap)
    ap.add_argument("--draft-vocab", type=int, default=16384)
    ap.add_argument("--steps-ttt", type=int, default=6)
    add_run_args(ap, epochs=4, lr=1e-3)
    ap.add_argument("--soft-labels", action="store_true",
                    help="learn the target's distribution over the draft vocabulary (EAGLE-3 / SpecForge) instead of its greedy token")
    ap.add_argument("--init-head", default="",
                    help="go on training this head (its weights and draft vocabulary) instead of a new one: device calls add up")
    ap.add_argument("--widen-intermediate", type=int, default=0,
                    help="with --init-head: widen its MLP to this many units first, keeping its function (new down_proj columns zero)")
    args = ap.parse_args()
    if args.widen_intermediate and not args.init_head:
        ap.error("--widen-intermediate widens the head given by --init-head (a new head: the target's intermediate size)")
    check_data_args(ap, args)
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    t0 = time.time()
    dev = args.device
    tok, target = load_target(args.model, dev)
    cfg = target.config
    data, train_prompts, held_topics, data_seed = training_conversations(args, tok, target, t0)
    if args.data_only:
        return

    # Target features per batch, on the fly: aux states and the target's greedy next tokens.
    def features(batch, draft_ids=None):
        return target_features(tok, target, batch, dev, draft_ids)

    previous_steps = 0
    if args.init_head:  # its draft vocabulary stays (its LM head's rows are those tokens)
        head, draft_ids = load_head(args.init_head, cfg, dev)
        nv, covered = draft_ids.numel(), None
        prior = os.path.join(args.init_head, "training.json")
        if os.path.exists(prior):
            before = json.load(open(prior))
            previous_steps = before.get("optimizer_steps_total", before.get("optimizer_steps", 0))
            covered = before.get("draft_vocab_coverage")  # the vocabulary is the same
        print(f"going on from {args.init_head}: {nv} draft tokens, {previous_steps} optimizer steps before", flush=True)
        if args.widen_intermediate:
            widen_mlp(head, args.widen_intermediate, args.seed + 20)
            print(f"MLP widened to {head.intermediate} units (the new ones start at zero output)", flush=True)
    else:
        # The draft vocabulary: the target tokens it predicts most often in the data.
        counts = torch.zeros(cfg.vocab_size, dtype=torch.long, device=dev)
        for b in range(0, len(data), 64):
            ids, valid, loss_mask, _, labels, _ = features(data[b:b + 64])
            counts += torch.bincount(labels[loss_mask].flatten(), minlength=cfg.vocab_size)
        nv = min(args.draft_vocab, int((counts > 0).sum()))
        draft_ids = torch.sort(torch.topk(counts, nv).indices).values
        covered = counts[draft_ids].sum().item() / counts.sum().item()
        print(f"draft vocabulary: {nv} tokens cover {100 * covered:.2f}% of the target's answer tokens", flush=True)
        head = Eagle3Head(cfg, nv).to(dev)
        with torch.no_grad():  # the LM head starts as the target's (tied) rows
            head.lm_head.weight.copy_(target.get_input_embeddings().weight[draft_ids].float())
    t2d = torch.full((cfg.vocab_size,), -1, dtype=torch.long, device=dev)
    t2d[draft_ids] = torch.arange(nv, device=dev)
    embed = target.get_input_embeddings()
    opt = torch.optim.AdamW(head.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.0)
    schedule = TimedSchedule(opt, args.epochs * (len(data) // args.batch), budget(args, t0))
    print(f"training for {schedule.total} steps or {schedule.budget:.0f} s", flush=True)
    data.sort(key=lambda x: len(x[0]) + len(x[1]))  # similar lengths per batch
    batches = [list(range(b, min(b + args.batch, len(data)))) for b in range(0, len(data), args.batch)]
    step, done = 0, False
    for epoch in range(args.epochs):
        random.Random(args.seed + 10 + epoch).shuffle(batches)
        acc_sum = torch.zeros(args.steps_ttt, device=dev)  # on the device: read only when printed
        n_sum = torch.zeros(args.steps_ttt, device=dev)
        for bi in batches:
            ids, valid, loss_mask, aux, labels, probs = features([data[i] for i in bi], draft_ids if args.soft_labels else None)
            with torch.autocast("cuda" if dev == "cuda" else "cpu", dtype=torch.bfloat16):
                outs = ttt_forward(head, embed, aux.to(torch.bfloat16), ids, valid, args.steps_ttt)
            loss, correct, counted = ttt_loss(outs, labels, loss_mask, valid, t2d, probs)
            acc_sum += correct
            n_sum += counted
            stop = schedule.update(loss, head.parameters())
            step = schedule.step
            if step % 1000 == 0 and schedule.rate:
                print(f"  {schedule.rate:.1f} steps/s: the schedule ends at step {schedule.total}", flush=True)
            if step % 50 == 0:
                accs = " ".join(f"{a / max(n, 1):.3f}" for a, n in zip(acc_sum.tolist(), n_sum.tolist()))
                print(f"  epoch {epoch} step {step}/{schedule.total} loss {loss.item():.3f} top-1 per step {accs} ({time.time() - t0:.0f} s)", flush=True)
            if stop:
                done = True
                break
        accs = " ".join(f"{a / max(n, 1):.3f}" for a, n in zip(acc_sum.tolist(), n_sum.tolist()))
        print(f"epoch {epoch}: train top-1 per TTT step {accs}", flush=True)
        if done:
            print(f"stopped after {step} steps ({schedule.why_stopped()})", flush=True)
            break

    save_head(head, draft_ids, cfg, args.out)
    held = prompt_sets.prompts(held_topics, args.seed + 2)
    json.dump({"seed": args.seed, "data_seed": data_seed, "train_prompts": len(train_prompts), "conversations": len(data), "draft_vocab": nv,
               "draft_vocab_coverage": covered, "intermediate_size": head.intermediate, "ttt_steps": args.steps_ttt, "optimizer_steps": step,
               "init_head": args.init_head or None, "optimizer_steps_total": previous_steps + step,
               "settings": {k: v for k, v in vars(args).items() if k not in ("model", "out", "data_cache")},
               "held_out_topics": held_topics, "held_out_prompts_sample": held[:50]},
              open(os.path.join(args.out, "training.json"), "w"), indent=2)
    print(f"wrote {args.out} ({time.time() - t0:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
