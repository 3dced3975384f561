#!/usr/bin/env python3
"""What a trained EAGLE-3 head should accept, computed in PyTorch, to hold against what Aerie
measures (eval_spec.py): the target answers prompts greedily (transformers), the head runs the
training-time-test forward of train.py over each answer, and at every answer position the chain
accept length is 1 + the number of leading draft steps whose token equals the target's greedy
token. For greedy answers this is exactly what a chain of that many steps accepts when a round
starts at that position, so a head that reaches 3.0 here and less in Aerie points at the engine,
one that reaches the same points at the head.

  head_accept.py --model smollm2.gguf --head DIR [--split held-out|train] [--prompts 16] [--steps 5]
                 [--chain-stop 0.2 0.3]

--chain-stop P ... also reports the chains Aerie's --speculative-chain-stop-probability P would
draft (spec/chain_stop.hpp) at batch 1: a round drafts another token while the product of the
head's top probabilities of its tokens so far is at least P, up to --steps tokens.
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import prompts as prompt_sets  # noqa: E402
import train as trainer  # noqa: E402


def stop_length(tops, threshold):
    """Draft tokens a chain holds under --speculative-chain-stop-probability `threshold`: the
    first token always, another while the product of the top probabilities so far is at least
    the threshold (spec/chain_stop.hpp at batch 1). tops: the head's top probability per step."""
    product = 1.0
    for k, p in enumerate(tops):
        product *= float(p)
        if product < threshold:
            return k + 1
    return len(tops)


def chain_stop_rounds(right, tops, lengths, threshold):
    """Greedy rounds as the engine runs them (each starts where the last one stopped) with chains
    cut by stop_length: (tokens per verify, draft tokens per round). right / tops: [prompts,
    positions, steps] whether step k's token from position i is the target's, and its top
    probability; lengths: each prompt's (prompt tokens, answer tokens)."""
    tokens = rounds = drafted = 0
    for r, (p, a) in enumerate(lengths):
        i = p - 1
        while i < p + a - 2:
            n = stop_length(tops[r, i].tolist(), threshold)
            lead = 0
            while lead < n and bool(right[r, i, lead]):
                lead += 1
            tokens, rounds, drafted, i = tokens + 1 + lead, rounds + 1, drafted + n, i + 1 + lead
    return tokens / max(rounds, 1), drafted / max(rounds, 1)


@torch.no_grad()
def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--head", required=True, nargs="+", help="one or more head folders, measured on the same answers")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--split", choices=["held-out", "train"], default="held-out")
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--max-new", type=int, default=128)
    ap.add_argument("--steps", type=int, default=5, help="draft steps per round (a chain)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--chain-stop", type=float, nargs="*", default=[], help="thresholds of --speculative-chain-stop-probability to report")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    tok, target = trainer.load_target(args.model, args.device)
    train, held = prompt_sets.split(args.seed)
    ps = (prompt_sets.prompts(held, args.seed + 2) if args.split == "held-out" else prompt_sets.prompts(train, args.seed + 1))[: args.prompts]
    data = trainer.generate_answers(tok, target, ps, args.device, args.max_new, len(ps), 0.0, args.seed)
    ids, valid, _, aux, labels, _ = trainer.target_features(tok, target, data, args.device)
    T = ids.shape[1]
    answer = torch.zeros_like(valid)
    for r, (p, a) in enumerate(data):
        answer[r, len(p) - 1:len(p) + len(a) - 1] = True  # positions whose next token is the answer's
    results = {}
    for folder in args.head:
        head, d2t = trainer.load_head(folder, target.config, args.device)
        head.eval()
        with torch.autocast("cuda" if args.device == "cuda" else "cpu", dtype=torch.bfloat16):  # as in training
            outs = trainer.ttt_forward(head, target.get_input_embeddings(), aux, ids, valid, args.steps)
        # A round whose bonus token sits at i + 1 (answer[i]): step k reads the head's state and
        # token i + 1 + k and drafts labels[i + 1 + k]; it counts while every earlier step was right.
        run = torch.ones_like(valid)
        accept = torch.ones(valid.shape, dtype=torch.float32, device=args.device)
        per_step, rights, tops = [], [], []
        for k, logits in enumerate(outs):
            pos = (torch.arange(T, device=args.device) + 1 + k).clamp(max=T - 1)
            inside = answer[:, pos] & (torch.arange(T, device=args.device) + 1 + k < T)[None]
            right = (d2t[logits.argmax(-1)] == labels[:, pos]) & inside
            run = run & right
            accept += run.float()
            per_step.append(float((right & answer).sum() / answer.sum()))
            rights.append(right.cpu())
            tops.append(torch.softmax(logits.float(), -1).amax(-1).cpu())
        mean = float(accept[answer].mean())
        # Greedy decoding's own rounds: the first starts at the prompt's end, each next one where
        # the last stopped, so rounds start after a rejection as they do in the engine.
        tokens = rounds = 0
        per_prompt = []  # which requests draft well and which do not (in the JSON)
        for r, (p, a) in enumerate(data):
            i, t0, r0 = len(p) - 1, tokens, rounds
            while i < len(p) + len(a) - 2:
                n = int(accept[r, i])
                tokens, rounds, i = tokens + n, rounds + 1, i + n
            per_prompt.append({"prompt": ps[r], "answer_tokens": len(a), "accept_length_rounds": (tokens - t0) / max(rounds - r0, 1)})
        rounds_mean = tokens / max(rounds, 1)
        results[folder] = {"accept_length_every_position": mean, "accept_length_rounds": rounds_mean, "top1_per_step": per_step,
                           "per_prompt": per_prompt}
        right_steps, top_steps = torch.stack(rights, -1), torch.stack(tops, -1)  # [prompts, T, steps]
        for p in args.chain_stop:
            acc_len, drafted = chain_stop_rounds(right_steps, top_steps, [(len(pr), len(a)) for pr, a in data], p)
            results[folder].setdefault("chain_stop", {})[str(p)] = {"accept_length_rounds": acc_len, "draft_tokens_per_round": drafted}
            print(f"{folder}: chain {args.steps} stopped at {p}: accept length {acc_len:.2f} in greedy rounds, "
                  f"{drafted:.2f} draft tokens a round", flush=True)
        print(f"{folder}: {args.split} chain {args.steps}: accept length {rounds_mean:.2f} in greedy rounds, "
              f"{mean:.2f} from every position; top-1 per step {' '.join(f'{x:.3f}' for x in per_step)}", flush=True)
    if args.json:
        json.dump({"split": args.split, "prompts": len(ps), "steps": args.steps, "heads": results}, open(args.json, "w"), indent=2)


if __name__ == "__main__":
    main()
