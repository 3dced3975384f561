#!/usr/bin/env python3
"""distill_draft.py: a STANDALONE draft cut from the target and distilled from it.

1. torch, a small random Llama as the target: a draft with every target layer computes the
   target's logits; one with layers [0, 3] holds exactly those layers' weights (and the target's
   embeddings and final norm); bad --layers are refused; the predicting positions are the prompt's
   last and the answer's but its last; distillation steps bring the draft's distribution closer to
   the target's.
2. The real model, float32 on the CPU (skipped, 77, when SmolLM2 is not available offline):
   distill_draft.py writes a 2-layer draft from a few conversations, its config.json is a plain
   bf16 Llama (no GGUF quantization block), and aerie-generate drafts with it as a STANDALONE
   draft, chain and tree, with the answers of plain decoding (eval_spec.py fails otherwise in f32).

  distill_draft_test.py [--generate BIN]
"""
import json
import os
import subprocess
import sys
import tempfile

try:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
except ImportError:
    print("torch or transformers is not installed: skipped")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/: smollm2_or_skip
from smollm2_or_skip import ROOT, check, run_unit_then_engine, smollm2_path  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "tools", "train_eagle3"))
import distill_draft  # noqa: E402


def unit():
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=97, hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=4,
                      num_key_value_heads=2, max_position_embeddings=64, tie_word_embeddings=True)
    target = LlamaForCausalLM(cfg).eval()
    ids = torch.randint(0, 97, (2, 9))
    with torch.no_grad():
        want = target(input_ids=ids).logits
        whole = distill_draft.draft_from_target(target, [0, 1, 2, 3]).eval()
        check(torch.allclose(whole(input_ids=ids).logits, want, atol=1e-5), "a draft with every layer computes the target's logits")
    cut = distill_draft.draft_from_target(target, [0, 3])
    check(cut.config.num_hidden_layers == 2, "two layers")
    check(torch.equal(cut.model.layers[1].mlp.down_proj.weight, target.model.layers[3].mlp.down_proj.weight)
          and torch.equal(cut.model.layers[0].self_attn.q_proj.weight, target.model.layers[0].self_attn.q_proj.weight),
          "draft layer 1 is target layer 3, layer 0 is layer 0")
    check(torch.equal(cut.model.embed_tokens.weight, target.model.embed_tokens.weight) and torch.equal(cut.model.norm.weight, target.model.norm.weight),
          "the target's embeddings and final norm")
    for bad in ([], [0, 4], [1, 1]):
        try:
            distill_draft.draft_from_target(target, bad)
            check(False, f"layers {bad} must be refused")
        except ValueError:
            pass
    batch = [([5, 6, 7], [8, 9]), ([1], [2, 3, 4])]
    valid = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 1, 0]], dtype=torch.bool)
    where = distill_draft.predicting_positions(batch, valid)
    check(where.tolist() == [[False, False, True, True, False], [True, True, True, False, False]], f"predicting positions {where.tolist()}")
    data = [([int(x) for x in torch.randint(3, 97, (6,))], [int(x) for x in torch.randint(3, 97, (8,))]) for _ in range(8)]
    opt = torch.optim.AdamW(cut.parameters(), lr=3e-3)
    first = None
    for _ in range(30):
        loss, agree = distill_draft.distill_step(target, cut, data, 0, "cpu")
        first = loss.item() if first is None else first
        opt.zero_grad()
        loss.backward()
        opt.step()
    check(loss.item() < 0.5 * first, f"distillation lowers the KL ({first:.3f} -> {loss.item():.3f})")
    check(agree[1].item() == sum(len(a) for _, a in data), "agreement counts every predicting position")
    print("unit: PASS")


def engine(generate):
    model = smollm2_path()
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "draft")
        run = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "train_eagle3", "distill_draft.py"), "--model", model, "--out", out,
                              "--device", "cpu", "--limit-prompts", "4", "--max-new", "8", "--epochs", "1", "--batch", "2", "--layers", "0,29"],
                             capture_output=True, text=True, timeout=900)
        print(run.stdout[-1500:], run.stderr[-1500:])
        check(run.returncode == 0, f"distill_draft.py exited {run.returncode}")
        cfg = json.load(open(os.path.join(out, "config.json")))
        check(cfg["num_hidden_layers"] == 2 and cfg["vocab_size"] == 49152 and cfg["tie_word_embeddings"] and cfg["dtype"] == "bfloat16"
              and "quantization_config" not in cfg, f"a plain 2-layer bf16 Llama config: {cfg}")
        rows = os.path.join(tmp, "rows.json")
        ev = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "train_eagle3", "eval_spec.py"), "--generate", generate, "--model", model,
                             "--head", out, "--algorithm", "STANDALONE", "--device", "cpu", "--dtype", "f32", "--prompts", "2", "--max-new", "16",
                             "--batch-size", "1", "--temperature", "0", "--configs", "plain", "chain-3", "tree-4x3-8", "--json", rows],
                            capture_output=True, text=True, timeout=600)
        print(ev.stdout, ev.stderr[-2000:])
        check(ev.returncode == 0, f"eval_spec.py --algorithm STANDALONE exited {ev.returncode}")
        got = {r["config"]: r for r in json.load(open(rows))["rows"]}
        for name in ("chain-3", "tree-4x3-8"):
            check(got[name]["greedy_equal_plain"] and got[name]["accept_length"] >= 1.0, f"{name}: the STANDALONE draft's answers equal plain's")
    print("engine: PASS")


if __name__ == "__main__":
    run_unit_then_engine(unit, engine)
