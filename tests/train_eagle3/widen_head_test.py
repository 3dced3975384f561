#!/usr/bin/env python3
"""A head's MLP widened by train.py (--widen-intermediate: new gate/up rows random, new down_proj
columns zero) keeps its function, and a head whose intermediate_size differs from the target's is
what Aerie loads and drafts with.

1. torch, no model: a random head's training-time-test logits and output states are the same
   before and after widen_mlp (f32), the new units are there, and widening to a smaller width fails.
2. The real model, float32 on the CPU (skipped, 77, when SmolLM2 is not available offline): the
   shipped head widened to 2.5x its MLP, written by save_head (config.json's intermediate_size is
   the new width), drafts through aerie-generate with the answers of plain decoding and the
   accept length of the shipped head.

  widen_head_test.py [--generate BIN]
"""
import json
import os
import subprocess
import sys
import tempfile
import types

try:
    import torch
except ImportError:
    print("torch is not installed: skipped")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/: smollm2_or_skip
from smollm2_or_skip import ROOT, check, run_unit_then_engine, smollm2_path  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "tools", "train_eagle3"))
import train  # noqa: E402

SHIPPED = os.path.join(ROOT, "assets", "smollm2-eagle3")


def unit():
    torch.manual_seed(0)
    cfg = types.SimpleNamespace(hidden_size=64, intermediate_size=96, num_attention_heads=4, num_key_value_heads=2,
                                rope_theta=10000.0, rms_norm_eps=1e-5)
    head = train.Eagle3Head(cfg, 50)
    for p in head.parameters():  # not the init's small weights: differences would show
        p.data.normal_(0, 0.2)
    embed = torch.nn.Embedding(80, 64)
    B, T = 2, 7
    aux, ids = torch.randn(B, T, 3 * 64), torch.randint(0, 80, (B, T))
    valid = torch.ones(B, T, dtype=torch.bool)
    valid[1, 5:] = False
    with torch.no_grad():
        before = train.ttt_forward(head, embed, aux, ids, valid, 3)
        hidden, attn = torch.randn(B, T, 64), torch.randn(B, 4, T, 16)
        state_before = head.finish(hidden, attn)[0]
    train.widen_mlp(head, 240, seed=5)
    check(head.intermediate == 240 and head.gate_proj.weight.shape == (240, 64) and head.up_proj.weight.shape == (240, 64)
          and head.down_proj.weight.shape == (64, 240), "the widened shapes")
    check(bool((head.down_proj.weight[:, 96:] == 0).all()) and float(head.gate_proj.weight[96:].detach().abs().sum()) > 0,
          "new down_proj columns zero, new gate rows random")
    with torch.no_grad():
        after = train.ttt_forward(head, embed, aux, ids, valid, 3)
        state_after = head.finish(hidden, attn)[0]
    for k, (x, y) in enumerate(zip(before, after)):
        check(torch.allclose(x, y, atol=1e-5, rtol=1e-5), f"step {k}'s logits keep their values ({(x - y).abs().max():.2e})")
    check(torch.allclose(state_before, state_after, atol=1e-5), "the output state keeps its values")
    check(len(list(head.parameters())) == 13 and all(p.requires_grad for p in head.parameters()), "every weight trains")
    try:
        train.widen_mlp(head, 200, seed=5)
        check(False, "narrowing must fail")
    except ValueError:
        pass
    print("unit: PASS")


def eval_rows(generate, model, head, json_path):
    cmd = [sys.executable, os.path.join(ROOT, "tools", "train_eagle3", "eval_spec.py"), "--generate", generate, "--model", model,
           "--head", head, "--device", "cpu", "--dtype", "f32", "--prompts", "2", "--max-new", "24", "--batch-size", "1",
           "--temperature", "0", "--configs", "plain", "chain-3", "--json", json_path]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    print(out.stdout, out.stderr[-2000:])
    check(out.returncode == 0, f"eval_spec.py with {head} exited {out.returncode}")
    with open(json_path) as f:
        return {r["config"]: r for r in json.load(f)["rows"]}


def engine(generate):
    model = smollm2_path()
    with tempfile.TemporaryDirectory() as tmp:
        cfg = types.SimpleNamespace(**json.load(open(os.path.join(SHIPPED, "config.json"))))
        head, draft_ids = train.load_head(SHIPPED, cfg, "cpu")
        width = head.intermediate * 5 // 2
        train.widen_mlp(head, width, seed=3)
        wide = os.path.join(tmp, "wide")
        train.save_head(head, draft_ids, cfg, wide)
        written = json.load(open(os.path.join(wide, "config.json")))
        check(written["intermediate_size"] == width, f"config.json's intermediate_size {written['intermediate_size']} (want {width})")
        shipped = eval_rows(generate, model, SHIPPED, os.path.join(tmp, "shipped.json"))
        widened = eval_rows(generate, model, wide, os.path.join(tmp, "wide.json"))
        spec = widened["chain-3"]
        check(spec["greedy_equal_plain"] and spec["outputs_equal_plain"] == 2, "the widened head's answers equal plain's")
        check(abs(spec["accept_length"] - shipped["chain-3"]["accept_length"]) < 1e-9,
              f"the widened head accepts as the shipped one ({spec['accept_length']} vs {shipped['chain-3']['accept_length']})")
    print("engine: PASS")


if __name__ == "__main__":
    run_unit_then_engine(unit, engine)
