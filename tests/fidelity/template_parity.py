#!/usr/bin/env python3
"""Aerie's Jinja subset (launch/jinja) against transformers' chat-template renderer: the
templates under chat_templates/ (ChatML/SmolLM2, Llama-2, Llama-3.1, Mistral, Qwen2 and a
template of the constructs such templates use), each over generated conversations
(multi-turn, system prompts, empty content, unicode, tools, wrong role orders): the same text,
or an error in both with the template's own message.

  template_parity.py --render BIN/aerie-render-template [--conversations N]
"""
import argparse
import json
import os
import random
import subprocess
import sys

try:
    from jinja2.exceptions import TemplateError
    from transformers.utils.chat_template_utils import _compile_jinja_template
except Exception as e:  # noqa: BLE001
    print(f"SKIP: transformers' chat template renderer unavailable ({e})")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
TEXTS = ["Hi", "Hello there!", "What is the capital of France?", "", " ", "  padded with spaces  ", "line one\nline two\n\n",
         "héllo wörld café", "日本語のテキスト", "emoji 😀🚀 and © symbols", "quotes ' and \" and \\ backslash",
         "braces {{ not a tag }} {% neither %}", "<|im_start|>looks special<|im_end|>", "tabs\tand\r\nCRLF", "42",
         "a much longer message " * 12, "Is this a question?", "trailing newline\n", "\u3000ideographic space\u3000"]
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
                                           "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                                                                                          "days": {"type": "integer"}},
                                                          "required": ["city"]}}},
         {"type": "function", "function": {"name": "search", "description": "Web search: «unicode» ok",
                                           "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}]


def conversation(rng, allow_tools):
    msgs = []
    if rng.random() < 0.5:
        msgs.append({"role": "system", "content": rng.choice(TEXTS)})
    turns = rng.randint(0 if rng.random() < 0.05 else 1, 6)
    role = "user"
    for _ in range(turns):
        if rng.random() < 0.06:  # a wrong order now and then: templates that check it must raise
            role = "assistant" if role == "user" else "user"
        m = {"role": role, "content": rng.choice(TEXTS)}
        if allow_tools and role == "assistant" and rng.random() < 0.2:
            m["tool_calls"] = [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": rng.choice(TEXTS[:4])}}}]
            msgs.append(m)
            msgs.append({"role": "tool", "content": rng.choice(["sunny", '{"temp": 21}', "ß"])})
            role = "user"
            continue
        if rng.random() < 0.05:
            m["content"] = [{"type": "text", "text": rng.choice(TEXTS)}, {"type": "image", "url": "x.png"}]
        msgs.append(m)
        role = "assistant" if role == "user" else "user"
    ctx = {"messages": msgs, "add_generation_prompt": rng.random() < 0.8, "bos_token": "<s>", "eos_token": "</s>"}
    if allow_tools and rng.random() < 0.3:
        ctx["tools"] = TOOLS[: rng.randint(1, 2)]
    if rng.random() < 0.1:
        ctx["date_string"] = "01 Jan 2026"
    return ctx


def reference(tpl, ctx):
    try:
        return {"text": tpl.render(**ctx)}
    except TemplateError as e:
        # raise_exception raises TemplateError itself: Aerie must report the same message.
        return {"error": str(e), "raised": type(e) is TemplateError}
    except Exception as e:  # noqa: BLE001  (type errors: an error in both is enough)
        return {"error": str(e), "raised": False}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--render", required=True)
    ap.add_argument("--conversations", type=int, default=250)
    args = ap.parse_args()
    seed = int(os.environ.get("AERIE_TEST_SEED", random.SystemRandom().randrange(1 << 30)))
    print(f"seed {seed} (set AERIE_TEST_SEED to repeat)")
    failures = 0
    for name in sorted(os.listdir(os.path.join(HERE, "chat_templates"))):
        path = os.path.join(HERE, "chat_templates", name)
        source = open(path, encoding="utf-8").read()
        tpl = _compile_jinja_template(source)
        rng = random.Random(f"{seed}-{name}")
        tools = "tool" in source or name == "features.jinja"
        contexts = [conversation(rng, tools) for _ in range(args.conversations)]
        lines = "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in contexts)
        out = subprocess.run([args.render, path], input=lines, capture_output=True, text=True, encoding="utf-8", timeout=300)
        if out.returncode != 0:
            print(f"FAIL {name}: aerie-render-template exited {out.returncode}: {out.stderr.strip()}")
            failures += 1
            continue
        got = [json.loads(line) for line in out.stdout.splitlines()]
        bad = errors = 0
        for ctx, want, have in zip(contexts, (reference(tpl, c) for c in contexts), got):
            if "error" in want:
                errors += 1
                ok = "error" in have and (not want["raised"] or want["error"] in have["error"])
            else:
                ok = have.get("text") == want["text"]
            if not ok:
                bad += 1
                if bad <= 3:
                    print(f"  {name}: context {json.dumps(ctx, ensure_ascii=False)[:300]}")
                    print(f"    transformers: {json.dumps(want, ensure_ascii=False)[:600]}")
                    print(f"    aerie:        {json.dumps(have, ensure_ascii=False)[:600]}")
        if len(got) != len(contexts):
            bad += 1
            print(f"  {name}: {len(got)} answers for {len(contexts)} contexts")
        print(f"{'PASS' if bad == 0 else 'FAIL'} {name}: {len(contexts) - bad}/{len(contexts)} identical ({errors} raise in both)")
        failures += bad > 0
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
