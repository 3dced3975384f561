#!/usr/bin/env python3
"""Aerie's GGUF reader against gguf's Python package (llama.cpp's reference): files written
by gguf.GGUFWriter with every tensor type Aerie reads (F32, F16, BF16, Q8_0, Q4_0, Q4_1),
dequantized by Aerie and by gguf.quants: identical values. Then the same file truncated at
many points and with random bytes of its header and tensor table changed: Aerie either reads
it or refuses it with a clear error; it never crashes or hangs. Last, a GGUF "llama"
(sentencepiece-style) vocabulary made from a sentencepiece BPE model trained here (byte
fallback, Llama's settings): Aerie's ids and text equal the sentencepiece package's.

  gguf_parity.py --dump BIN/aerie-gguf-dump [--tokenize BIN/aerie-tokenize]
"""
import argparse
import json
import os
import random
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

TYPES = [Q.F32, Q.F16, Q.BF16, Q.Q8_0, Q.Q4_0, Q.Q4_1]


def dump(binary, path):
    out = subprocess.run([binary, path], capture_output=True, text=True, timeout=60)
    assert out.returncode in (0, 1), f"{path}: aerie-gguf-dump died (exit {out.returncode}): {out.stderr[-500:]}"
    return out.returncode, json.loads(out.stdout)


def write_file(path, rng):
    w = gguf.GGUFWriter(path, "llama")
    w.add_block_count(2)
    w.add_string("general.name", "parity ✓")
    w.add_array("tokenizer.ggml.tokens", ["a", "b", "<s>"])
    w.add_float32("llama.rope.freq_base", 10000.0)
    w.add_bool("tokenizer.ggml.add_bos_token", True)
    expected = {}
    for i, qt in enumerate(TYPES):
        rows, cols = rng.choice([1, 3, 8]), 32 * rng.choice([1, 2, 5])
        data = (np.random.default_rng(rng.randrange(1 << 30)).standard_normal((rows, cols)) * rng.choice([0.02, 1.0, 30.0])).astype(np.float32)
        if qt == Q.F32:
            raw = data
        elif qt == Q.F16:
            raw = data.astype(np.float16)
        else:
            raw = gguf.quants.quantize(data, qt)
        name = f"t{i}.{qt.name}"
        w.add_tensor(name, raw, raw_shape=raw.shape if qt in (Q.F32, Q.F16) else None, raw_dtype=None if qt in (Q.F32, Q.F16) else qt)
        expected[name] = (qt, gguf.quants.dequantize(raw, qt) if qt not in (Q.F32, Q.F16) else raw.astype(np.float32), (rows, cols))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return expected


def check_sentencepiece_vocab(tokenize, tmp, rng):
    import sentencepiece as spm
    corpus = os.path.join(tmp, "corpus.txt")
    lines = ["the quick brown fox jumps over the lazy dog", "paged attention keeps the cache in pages",
             "speculative decoding drafts tokens and verifies them", "naïve café déjà vu", "numbers 12345 and 67"]
    open(corpus, "w", encoding="utf-8").write("\n".join(lines * 40))
    prefix = os.path.join(tmp, "sp")
    spm.SentencePieceTrainer.train(input=corpus, model_prefix=prefix, vocab_size=300, model_type="bpe", byte_fallback=True,
                                   normalization_rule_name="identity", remove_extra_whitespaces=False, add_dummy_prefix=True,
                                   bos_id=1, eos_id=2, unk_id=0, minloglevel=2)
    sp = spm.SentencePieceProcessor(model_file=prefix + ".model")
    n = sp.get_piece_size()
    types = [2 if sp.is_unknown(i) else 3 if sp.is_control(i) else 6 if sp.is_byte(i) else 5 if sp.is_unused(i) else 1 for i in range(n)]
    path = os.path.join(tmp, "spm.gguf")
    w = gguf.GGUFWriter(path, "llama")
    w.add_string("tokenizer.ggml.model", "llama")
    w.add_array("tokenizer.ggml.tokens", [sp.id_to_piece(i) for i in range(n)])
    w.add_array("tokenizer.ggml.scores", [float(sp.get_score(i)) for i in range(n)])
    w.add_array("tokenizer.ggml.token_type", types)
    w.add_uint32("tokenizer.ggml.bos_token_id", 1)
    w.add_uint32("tokenizer.ggml.eos_token_id", 2)
    w.add_uint32("tokenizer.ggml.unknown_token_id", 0)
    w.add_bool("tokenizer.ggml.add_bos_token", True)
    w.add_tensor("dummy", np.zeros((1, 32), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    texts = lines + ["", " leading", "double  space", "unseen ✓ 日本 😀", "tabs\tand\nnewlines"] + \
        ["".join(rng.choice("abc xyz éü 日😀 12") for _ in range(rng.randint(1, 30))) for _ in range(100)]
    out = subprocess.run([tokenize, path], input="".join(json.dumps(t) + "\n" for t in texts), capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    for text, line in zip(texts, out.stdout.splitlines()):
        got = json.loads(line)
        want = [1] + sp.encode(text)
        assert got.get("ids") == want, f"sentencepiece vocabulary: {text!r}: aerie {got} sentencepiece {want}"
        assert got["text"] == sp.decode(want), f"sentencepiece vocabulary: decode {got['text']!r} != {sp.decode(want)!r}"
    print(f"  GGUF llama (sentencepiece) vocabulary: {len(texts)} strings, ids and text identical to sentencepiece")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dump", required=True)
    ap.add_argument("--tokenize")
    args = ap.parse_args()
    seed = int(os.environ.get("AERIE_TEST_SEED", random.SystemRandom().randrange(1 << 30)))
    print(f"seed {seed} (set AERIE_TEST_SEED to repeat)")
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "parity.gguf")
        expected = write_file(path, rng)
        rc, got = dump(args.dump, path)
        assert rc == 0, f"Aerie refused a valid file: {got}"
        by_name = {t["name"]: t for t in got["tensors"]}
        for name, (qt, want, shape) in expected.items():
            t = by_name[name]
            assert t["type"] == qt.name, f"{name}: type {t['type']} != {qt.name}"
            assert tuple(t["shape"]) == shape, f"{name}: shape {t['shape']} != {shape}"
            have = np.array(t["values"], dtype=np.float32).reshape(shape)
            assert np.array_equal(have, want.reshape(shape).astype(np.float32)), \
                f"{name}: max difference {np.abs(have - want.reshape(shape)).max()}"
            print(f"  {qt.name:5s} {shape}: identical to gguf.quants")
        assert "general.name" in got["metadata_keys"] and "tokenizer.ggml.tokens" in got["metadata_keys"]

        blob = open(path, "rb").read()
        # The tensor data starts after the header, metadata and tensor table.
        tensors = gguf.GGUFReader(path).tensors
        table_end = min(int(t.data_offset) for t in tensors)
        data_end = max(int(t.data_offset) + int(t.n_bytes) for t in tensors)  # the writer may pad past it
        cuts = sorted(set([0, 3, 4, 7, 8, 15, 16, 23, 24] + [rng.randrange(data_end) for _ in range(60)] + [data_end - 1]))
        refused = 0
        for cut in cuts:
            p = os.path.join(tmp, "cut.gguf")
            open(p, "wb").write(blob[:cut])
            rc, out = dump(args.dump, p)
            assert rc == 1 and out["error"], f"truncated at {cut} of {len(blob)} bytes: not refused ({out if rc else 'read'})"
            refused += 1
        print(f"  truncated at {refused} points: each refused with an error, e.g. {out['error'][:120]!r}")
        outcomes = {0: 0, 1: 0}
        for _ in range(300):
            b = bytearray(blob)
            for _ in range(rng.randint(1, 6)):
                at = rng.randrange(table_end)
                b[at] = rng.choice([0, 0xFF, rng.randrange(256)])
            p = os.path.join(tmp, "bad.gguf")
            open(p, "wb").write(bytes(b))
            rc, out = dump(args.dump, p)
            outcomes[rc] += 1
        print(f"  300 files with changed header bytes: {outcomes[1]} refused cleanly, {outcomes[0]} still readable, none crashed")
        if args.tokenize:
            check_sentencepiece_vocab(args.tokenize, tmp, rng)
    print("PASS")


if __name__ == "__main__":
    main()
