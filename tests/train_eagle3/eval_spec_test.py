#!/usr/bin/env python3
"""eval_spec.py (speculative decoding with the shipped EAGLE-3 head against plain decoding, through
aerie-generate) on the real model, float32 on the CPU, two held-out prompts: with plain first,
every row has its speedup over plain and the speculative greedy answers equal plain's token for
token (eval_spec.py itself fails otherwise in f32); without plain (comparing heads only) the rows
carry no speedup and the run still succeeds (it used to end in a TypeError after the first row).
Skips (77) when SmolLM2 is not available offline.

  eval_spec_test.py --generate BIN
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/: smollm2_or_skip
from smollm2_or_skip import ROOT, check, smollm2_path  # noqa: E402

EVAL = os.path.join(ROOT, "tools", "train_eagle3", "eval_spec.py")
sys.path.insert(0, os.path.dirname(EVAL))
import eval_spec  # noqa: E402
HEAD = os.path.join(ROOT, "assets", "smollm2-eagle3")


def run(generate, model, configs, json_path):
    cmd = [sys.executable, EVAL, "--generate", generate, "--model", model, "--head", HEAD, "--device", "cpu", "--dtype", "f32",
           "--prompts", "2", "--max-new", "16", "--batch-size", "1", "--temperature", "0", "--configs", *configs, "--json", json_path]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    print(out.stdout, out.stderr[-2000:])
    check(out.returncode == 0, f"eval_spec.py {' '.join(configs)} exited {out.returncode}")
    with open(json_path) as f:
        return json.load(f)["rows"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--generate", required=True)
    args = ap.parse_args()
    # Configuration names become aerie-generate's flags; other names are refused before any run.
    check(eval_spec.config_flags("plain") == [], "plain has no speculative flags")
    check(eval_spec.config_flags("chain-6") == ["--speculative-num-steps", "6", "--speculative-eagle-topk", "1"], "chain-6")
    check(eval_spec.config_flags("tree-4x5-16") == ["--speculative-num-steps", "5", "--speculative-eagle-topk", "4",
                                                    "--speculative-num-draft-tokens", "16"], "tree-4x5-16")
    for bad in ["chain", "chain-0", "chain-x", "tree-4x5", "tree-0x5-8", "plain-2", "chain-3 "]:
        try:
            eval_spec.config_flags(bad)
            check(False, f"{bad!r} accepted")
        except ValueError:
            pass
    model = smollm2_path()
    with tempfile.TemporaryDirectory() as tmp:
        rows = run(args.generate, model, ["plain", "chain-2"], os.path.join(tmp, "with_plain.json"))
        check([r["config"] for r in rows] == ["plain", "chain-2"], f"rows {[r['config'] for r in rows]}")
        plain, spec = rows
        check(plain["speedup"] == 1.0 and spec["speedup"] > 0, "speedups over plain")
        check(spec["greedy_equal_plain"] and spec["outputs_equal_plain"] == 2, "f32 speculative greedy answers equal plain's")
        check(spec["accept_length"] >= 1.0 and spec["output_tokens"] == plain["output_tokens"], "accept length and tokens")
        rows = run(args.generate, model, ["chain-2"], os.path.join(tmp, "no_plain.json"))
        check(len(rows) == 1 and rows[0]["speedup"] is None and "greedy_equal_plain" not in rows[0], "a run without plain")
        check(rows[0]["output_ids"] == spec["output_ids"], "the same answers without the plain run")
    print("PASS")


if __name__ == "__main__":
    main()
