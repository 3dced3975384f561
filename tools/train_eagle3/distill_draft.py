#!/usr/bin/env python3
"""Distils a small STANDALONE draft for SmolLM2-135M-Instruct (#19's item 3): a Llama of the
target's width, vocabulary and tokenizer with a few layers, trained to match the target's
next-token distribution, and written as a Hugging Face Llama folder (config.json +
model.safetensors, bf16) that `--speculative-algorithm STANDALONE --speculative-draft-model-path
DIR` loads.

Recipe: the draft starts as the target with only the layers --layers names (by default its first
and last two: the embeddings, the final norm and the tied LM head come along), then learns the
target's whole next-token distribution (KL(target || draft) over the 49,152 tokens, the target's
probabilities computed on the fly) at the prompt's last position and every answer position of the
same training conversations train.py uses (the target's own answers, greedy and sampled: the
data flags are train.py's). A STANDALONE draft reads only tokens, not the target's hidden states
as an EAGLE head does, and carries the whole vocabulary in its embeddings (28.3M of SmolLM2's
parameters), so it is the larger and the costlier draft per step; docs/performance.md measures
what it accepts against the shipped EAGLE-3 head.

  PYTHONPATH=<gguf, accelerate> python3 distill_draft.py --model smollm2.gguf --out DIR [--layers 0,1,28,29]
"""
import argparse
import copy
import json
import os
import random
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train as trainer  # noqa: E402


def draft_from_target(target, layers):
    """A Llama with the target's config but only `layers` (target layer indices, in order), starting
    from those layers' weights and the target's embeddings, final norm and LM head."""
    from transformers import LlamaForCausalLM
    n = target.config.num_hidden_layers
    if not layers or any(not 0 <= i < n for i in layers) or len(set(layers)) != len(layers):
        raise ValueError(f"--layers must name distinct target layers in [0, {n}): {layers}")
    cfg = copy.deepcopy(target.config)
    cfg.num_hidden_layers = len(layers)
    if getattr(cfg, "layer_types", None):
        cfg.layer_types = [cfg.layer_types[i] for i in layers]
    # Loaded from a GGUF, the target's config says so; the draft's weights are plain tensors.
    for key in ("quantization_config", "_name_or_path"):
        if hasattr(cfg, key):
            delattr(cfg, key)
    draft = LlamaForCausalLM(cfg)
    state = {}
    for k, v in target.state_dict().items():
        if k.startswith("model.layers."):
            i = int(k.split(".")[2])
            if i in layers:
                state[k.replace(f"model.layers.{i}.", f"model.layers.{layers.index(i)}.", 1)] = v
        else:
            state[k] = v
    missing, unexpected = draft.load_state_dict(state, strict=False)
    # A tied LM head is the embedding: whether the state names it separately depends on the version.
    missing = [k for k in missing if not (k == "lm_head.weight" and cfg.tie_word_embeddings)]
    if missing or unexpected:
        raise RuntimeError(f"the draft's weights do not match the target's: missing {missing}, unexpected {unexpected}")
    return draft.float()


def predicting_positions(batch, valid):
    """Where the draft is asked for a token when it decodes: the prompt's last position and every
    answer position but the last (whose next token is past the answer)."""
    mask = torch.zeros_like(valid)
    for r, (p, a) in enumerate(batch):
        mask[r, len(p) - 1:len(p) + len(a) - 1] = True
    return mask & valid


def distill_step(target, draft, batch, pad_id, device):
    """The KL of the draft's next-token distribution from the target's on one batch, and how often
    their greedy tokens agree (as [agreeing, counted] on the device)."""
    ids, valid, _ = trainer.batch_tensors(batch, pad_id, device)
    where = predicting_positions(batch, valid)
    with torch.no_grad():
        teacher = target(input_ids=ids, attention_mask=valid.long()).logits[where].float()
    with torch.autocast("cuda" if torch.device(device).type == "cuda" else "cpu", dtype=torch.bfloat16):
        student = draft(input_ids=ids, attention_mask=valid.long()).logits[where].float()
    loss = F.kl_div(F.log_softmax(student, -1), F.log_softmax(teacher, -1), log_target=True, reduction="batchmean")
    agree = torch.stack([(student.argmax(-1) == teacher.argmax(-1)).sum().float(), torch.tensor(float(len(student)), device=student.device)])
    return loss, agree


def save_draft(draft, out):
    os.makedirs(out, exist_ok=True)
    draft.to(torch.bfloat16).save_pretrained(out, safe_serialization=True)
    draft.float()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cuda")
    trainer.add_data_args(ap)
    ap.add_argument("--layers", default="0,1,28,29", help="the target layers the draft starts from, comma-separated (2-4 for #19)")
    trainer.add_run_args(ap, epochs=2, lr=3e-4)
    args = ap.parse_args()
    trainer.check_data_args(ap, args)
    layers = [int(x) for x in args.layers.split(",") if x.strip()]
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    t0 = time.time()
    dev = args.device
    tok, target = trainer.load_target(args.model, dev)
    data, train_prompts, held_topics, data_seed = trainer.training_conversations(args, tok, target, t0)
    if args.data_only:
        return
    draft = draft_from_target(target, layers).to(dev).train()
    params = sum(p.numel() for p in draft.parameters())
    print(f"draft: target layers {layers}, {params / 1e6:.1f}M parameters", flush=True)
    opt = torch.optim.AdamW(draft.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.0)
    schedule = trainer.TimedSchedule(opt, args.epochs * (len(data) // args.batch), trainer.budget(args, t0))
    print(f"training for {schedule.total} steps or {schedule.budget:.0f} s", flush=True)
    data.sort(key=lambda x: len(x[0]) + len(x[1]))  # similar lengths per batch
    batches = [list(range(b, min(b + args.batch, len(data)))) for b in range(0, len(data), args.batch)]
    step, done, first_agree = 0, False, None
    for epoch in range(args.epochs):
        random.Random(args.seed + 10 + epoch).shuffle(batches)
        agree_sum = torch.zeros(2, device=dev)
        for bi in batches:
            loss, agree = distill_step(target, draft, [data[i] for i in bi], tok.eos_token_id, dev)
            agree_sum += agree
            if first_agree is None:
                first_agree = (agree[0] / agree[1]).item()  # the pruned target before any training
            stop = schedule.update(loss, draft.parameters())
            step = schedule.step
            if step % 50 == 0:
                a = agree_sum.tolist()
                print(f"  epoch {epoch} step {step}/{schedule.total} KL {loss.item():.3f} top-1 agreement {a[0] / max(a[1], 1):.3f} "
                      f"({time.time() - t0:.0f} s)", flush=True)
            if stop:
                done = True
                break
        a = agree_sum.tolist()
        print(f"epoch {epoch}: top-1 agreement with the target {a[0] / max(a[1], 1):.3f}", flush=True)
        if done:
            print(f"stopped after {step} steps ({schedule.why_stopped()})", flush=True)
            break
    save_draft(draft, args.out)
    a = agree_sum.tolist()
    json.dump({"seed": args.seed, "data_seed": data_seed, "layers": layers, "parameters": params, "conversations": len(data),
               "optimizer_steps": step, "top1_agreement_first_batch": first_agree, "top1_agreement_last_epoch": a[0] / max(a[1], 1),
               "settings": {k: v for k, v in vars(args).items() if k not in ("model", "out", "data_cache")},
               "held_out_topics": held_topics},
              open(os.path.join(args.out, "training.json"), "w"), indent=2)
    print(f"wrote {args.out} ({time.time() - t0:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
