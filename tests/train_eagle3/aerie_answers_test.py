#!/usr/bin/env python3
"""The EAGLE-3 trainer's answers through Aerie's engine (train.py --answers-by, generate_answers_aerie,
which feeds aerie-generate an --input-ids-file) against transformers' generate (generate_answers) on
the real model, float32 on the CPU: the same prompt ids and, greedy, the same answer ids token for
token, each ending at the EOS the target emitted (kept) or at the length limit. Sampled answers
(T = 0.8): one per prompt, in order, within the vocabulary and the length limit, reproducible with
the seed. Skips (77) when SmolLM2 or transformers' GGUF support is not available offline.

  aerie_answers_test.py --generate BIN
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/: smollm2_or_skip
from smollm2_or_skip import ROOT, check, smollm2_path  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "tools", "train_eagle3"))

PROMPTS = ["What is a lantern?", "Write a haiku about meadows.", "Give me three facts about copper.", "Hi"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--generate", required=True)
    args = ap.parse_args()
    model_path = smollm2_path()
    try:
        import torch
        import gguf  # noqa: F401  (transformers reads GGUF through it)
        import train
    except Exception as e:  # noqa: BLE001
        print(f"SKIP: torch / transformers with GGUF support are unavailable ({e})")
        sys.exit(77)
    torch.set_num_threads(2)
    tok, target = train.load_target(model_path, "cpu", torch.float32)
    max_new = 40
    hf = train.generate_answers(tok, target, PROMPTS, "cpu", max_new, len(PROMPTS), 0.0, 0)
    aerie = train.generate_answers_aerie(tok, args.generate, model_path, PROMPTS, "cpu", "f32", max_new, 0.0, 0, max_running=3)
    check(len(aerie) == len(PROMPTS), f"one answer per prompt: {len(aerie)}")
    ended = 0
    for (hp, ha), (ap_, aa), p in zip(hf, aerie, PROMPTS):
        check(hp == ap_, f"{p!r}: the same chat-template ids")
        check(ha == aa, f"{p!r}: greedy answers differ\n  transformers {ha}\n  aerie        {aa}")
        check(len(aa) == max_new or aa[-1] == tok.eos_token_id, f"{p!r}: an answer ends at EOS or the limit: {aa[-3:]}")
        ended += aa[-1] == tok.eos_token_id
    check(ended >= 1, "at least one answer ended at EOS (the short prompt), so that case was compared")

    sampled = train.generate_answers_aerie(tok, args.generate, model_path, PROMPTS, "cpu", "f32", max_new, 0.8, 5, max_running=3)
    again = train.generate_answers_aerie(tok, args.generate, model_path, PROMPTS, "cpu", "f32", max_new, 0.8, 5, max_running=3)
    vocab = target.config.vocab_size
    check(sampled == again, "the same seed gives the same sampled answers")
    check([x for x, _ in sampled] == [x for x, _ in hf], "sampled answers keep the prompts' order")
    for _, a in sampled:
        check(0 < len(a) <= max_new and all(0 <= t < vocab for t in a), f"a sampled answer within the vocabulary and limit: {a}")
    check(any(a != g for (_, a), (_, g) in zip(sampled, aerie)), "T = 0.8 samples (not every answer the greedy one)")
    print(f"PASS ({len(PROMPTS)} prompts, {ended} ended at EOS; greedy equal to transformers)")


if __name__ == "__main__":
    main()
