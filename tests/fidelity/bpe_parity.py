#!/usr/bin/env python3
"""Aerie's byte-level BPE (tokenizer.json) against the `tokenizers` package: byte-level BPE
tokenizers trained here (Llama-3 pre-tokenizer regex; GPT-2 ByteLevel regex), many strings
(ASCII, accents, CJK, emoji, digits, whitespace runs, contractions, added tokens inside the
text): identical ids (also with special-token text encoded as text, tokenizers'
encode_special_tokens), identical decoding, and streaming pieces that are valid UTF-8 and join
to the same text.

  bpe_parity.py --tokenize BIN/aerie-tokenize
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile

try:
    from tokenizers import Tokenizer, Regex, decoders, models, pre_tokenizers, trainers
except Exception as e:  # noqa: BLE001
    print(f"SKIP: tokenizers unavailable ({e})")
    sys.exit(77)

LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
          r"|\s*[\r\n]+|\s+(?!\S)|\s+")
CORPUS = ["hello world, the quick brown fox 123 jumps over 4567 lazy dogs!", "héllo wörld café naïve",
          "日本語のテキストと中文", "emoji 😀🚀👍🏽 and symbols ©®™", "tabs\tand\nnewlines\r\n  spaces   here",
          "it's they're we've I'm you'll he'd", "def f(x):\n    return x ** 2  # comment"]


def build(kind, path, seed):
    tok = Tokenizer(models.BPE(ignore_merges=(kind == "llama3")))
    if kind == "llama3":
        tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(LLAMA3), behavior="isolated", invert=False),
                                                     pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    else:
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    rng = random.Random(seed)
    tr = trainers.BpeTrainer(vocab_size=rng.choice([300, 500, 800]), special_tokens=["<|begin_of_text|>", "<|eot_id|>"],
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(CORPUS * 30, tr)
    tok.save(path)
    return tok


def samples(rng):
    out = list(CORPUS) + ["", " ", "  leading", "trailing  ", "a<|eot_id|>b", "<|begin_of_text|>Hi<|eot_id|>",
                          "1234567890", "x\n\n\ny", "ÀÉÎÕÜ ñ ß", "🙂" * 3, "mixed123abc!!!???", "'S 'T 'RE"]
    alphabet = "abc XYZ 0123 ,.!? \n\t éü 日本 😀 's "
    for _ in range(200):
        out.append("".join(rng.choice(alphabet) for _ in range(rng.randint(1, 40))))
    # Long single pieces (one word, one run of spaces): merged with a heap, not a rescan per merge.
    out += ["a" * 3000, " " * 2000, "ab" * 1500, "hello" * 600, "é" * 1000, "".join(rng.choice("abcde") for _ in range(4000))]
    # 80 KB of special tokens (issue #17: 28 s when every occurrence rescanned the text).
    out += ["<|eot_id|>" * 8000, "a<|eot_id|>" * 4000]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenize", required=True)
    args = ap.parse_args()
    seed = int(os.environ.get("AERIE_TEST_SEED", random.SystemRandom().randrange(1 << 30)))
    print(f"seed {seed}")
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp:
        for kind in ("llama3", "gpt2"):
            path = os.path.join(tmp, f"{kind}.json")
            tok = build(kind, path, seed)
            texts = samples(rng)
            res = subprocess.run([args.tokenize, path], input="\n".join(json.dumps(t) for t in texts) + "\n",
                                 capture_output=True, text=True, timeout=120)
            assert res.returncode == 0, res.stderr
            got = [json.loads(l) for l in res.stdout.splitlines()]
            assert len(got) == len(texts)
            for t, g in zip(texts, got):
                ref = tok.encode(t, add_special_tokens=False).ids
                assert "error" not in g, f"{kind}: {t!r}: {g['error']}"
                assert g["ids"] == ref, f"{kind}: {t!r}\n aerie {g['ids']}\n hf    {ref}"
                assert g["text"] == tok.decode(ref, skip_special_tokens=False), f"{kind}: decode {t!r}: {g['text']!r}"
                assert g["stream"] == g["text"] and g["pieces_valid_utf8"], f"{kind}: streaming {t!r}"
            # Special-token text as plain text (what chat content gets): tokenizers' split mode.
            tok.encode_special_tokens = True
            for t, g in zip(texts, got):
                ref = tok.encode(t, add_special_tokens=False).ids
                assert g["literal_ids"] == ref, f"{kind} literal: {t!r}\n aerie {g['literal_ids']}\n hf    {ref}"
            tok.encode_special_tokens = False
            print(f"{kind}: {len(texts)} strings, ids (also with special-token text as text) and decoding identical to tokenizers")
    print("bpe_parity: all checks passed")


if __name__ == "__main__":
    main()
