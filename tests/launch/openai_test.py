#!/usr/bin/env python3
"""Real clients against aerie-serve: the official `openai` package (completions and chat
completions, plain and streaming, usage, logprobs, stop strings, seeded sampling) and
sglang's own `bench_serving` (PyPI `sglang`, client side). The model folder has a real
byte-level BPE tokenizer with a Llama-3 chat template (serving_model.py) and random weights;
every answer is checked against /generate on the ids transformers' tokenizer and chat
template produce, decoded by transformers.

  openai_test.py --serve BIN/aerie-serve [--bench BIN/aerie-bench]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serving_model  # noqa: E402
from serve_process import running_server  # noqa: E402

try:
    import openai
except ImportError as e:
    print(f"SKIP: openai unavailable ({e})")
    sys.exit(77)


def post(url, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--serve", required=True)
    ap.add_argument("--bench", help="aerie-bench, to run `aerie-bench serving` against the server too")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="aerie_openai_")
    model_dir = os.path.join(work, "model")
    hf = serving_model.build(model_dir)
    with running_server(args.serve, ["--model-path", model_dir, "--load-format", "dummy", "--max-total-tokens", "16384",
                                     "--served-model-name", "tiny-chat"]) as (base, port):
        client = openai.OpenAI(base_url=base + "/v1", api_key="none")
        assert [m.id for m in client.models.list().data] == ["tiny-chat"]

        def reference(ids, n):
            r = post(base + "/generate", {"input_ids": ids, "sampling_params": {"max_new_tokens": n, "temperature": 0}})
            return r["output_ids"], hf.decode(r["output_ids"], skip_special_tokens=True), r

        # sglang's /tokenize and /detokenize agree with transformers' tokenizer.
        text = "The quick brown fox, naïve café 12345"
        t = post(base + "/tokenize", {"prompt": text})
        assert t["tokens"] == hf.encode(text) and t["count"] == len(t["tokens"]) and t["max_model_len"] > 0, t
        assert post(base + "/tokenize", {"prompt": text, "add_special_tokens": False})["tokens"] == hf.encode(text, add_special_tokens=False)
        assert post(base + "/detokenize", {"tokens": t["tokens"]})["text"] == hf.decode(t["tokens"], skip_special_tokens=True)
        try:
            post(base + "/detokenize", {"tokens": [10 ** 9]})
            raise AssertionError("an id outside the vocabulary was accepted")
        except urllib.error.HTTPError as e:
            assert e.code == 400
        print("/tokenize and /detokenize equal transformers")

        # Completions: plain and streamed, against /generate on transformers' ids.
        prompt = "The quick brown fox"
        ids = [hf.bos_token_id] + hf.encode(prompt, add_special_tokens=False)
        ref_ids, ref_text, _ = reference(ids, 24)
        c = client.completions.create(model="tiny-chat", prompt=prompt, max_tokens=24, temperature=0)
        assert c.choices[0].text == ref_text, (c.choices[0].text, ref_text)
        assert c.usage.prompt_tokens == len(ids) and c.usage.completion_tokens == len(ref_ids), c.usage
        assert c.object == "text_completion" and c.id.startswith("cmpl-")
        pieces, usage, finish = [], None, None
        for chunk in client.completions.create(model="tiny-chat", prompt=prompt, max_tokens=24, temperature=0, stream=True,
                                               stream_options={"include_usage": True}):
            if chunk.choices:
                pieces.append(chunk.choices[0].text)
                finish = chunk.choices[0].finish_reason or finish
            if chunk.usage:
                usage = chunk.usage
        assert "".join(pieces) == ref_text and finish == c.choices[0].finish_reason, (pieces, ref_text)
        assert usage and usage.completion_tokens == len(ref_ids), usage
        print(f"completions: plain and streamed text equal /generate ({len(ref_ids)} tokens, {len(pieces)} chunks)")

        # Chat: the prompt is transformers' chat template; plain and streamed.
        messages = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hello, world!"}]
        chat_ids = hf.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        chat_ids = chat_ids["input_ids"] if isinstance(chat_ids, dict) or hasattr(chat_ids, "keys") else chat_ids
        ref_ids, ref_text, _ = reference(list(chat_ids), 20)
        r = client.chat.completions.create(model="tiny-chat", messages=messages, max_tokens=20, temperature=0)
        assert r.usage.prompt_tokens == len(chat_ids), (r.usage, len(chat_ids))
        assert r.choices[0].message.role == "assistant" and r.choices[0].message.content == ref_text, (r, ref_text)
        deltas, roles, finish = [], [], None
        for chunk in client.chat.completions.create(model="tiny-chat", messages=messages, max_tokens=20, temperature=0,
                                                    stream=True):
            d = chunk.choices[0].delta
            if d.role:
                roles.append(d.role)
            if d.content:
                deltas.append(d.content)
            finish = chunk.choices[0].finish_reason or finish
        assert roles == ["assistant"] and "".join(deltas) == ref_text and finish == r.choices[0].finish_reason
        print("chat completions: the prompt equals transformers' chat template; plain and streamed replies equal /generate")

        # Logprobs: the greedy token is the most likely one; top lists have the asked size.
        lp = client.completions.create(model="tiny-chat", prompt=prompt, max_tokens=8, temperature=0, logprobs=3).choices[0].logprobs
        # (OpenAI's completions format keys top tokens by text: tokens whose text is the same
        # part of a character collapse into one key, so a dict may hold fewer than 3.)
        assert len(lp.token_logprobs) == 8 and all(1 <= len(t) <= 3 for t in lp.top_logprobs)
        for chosen, top in zip(lp.token_logprobs, lp.top_logprobs):
            assert chosen <= 0 and abs(chosen - max(top.values())) < 1e-5, (chosen, top)
            assert sum(2.718281828 ** v for v in top.values()) <= 1 + 1e-4
        cl = client.chat.completions.create(model="tiny-chat", messages=messages, max_tokens=6, temperature=0, logprobs=True,
                                            top_logprobs=2).choices[0].logprobs.content
        assert len(cl) == 6 and all(len(e.top_logprobs) == 2 and abs(e.logprob - e.top_logprobs[0].logprob) < 1e-5 for e in cl)
        g = post(base + "/generate", {"input_ids": ids, "return_logprob": True, "top_logprobs_num": 2,
                                      "sampling_params": {"max_new_tokens": 8, "temperature": 0}})
        assert [x[1] for x in g["meta_info"]["output_token_logprobs"]] == g["output_ids"]
        assert [abs(x[0] - lp.token_logprobs[i]) < 1e-5 for i, x in enumerate(g["meta_info"]["output_token_logprobs"])] == [True] * 8
        print("logprobs: completions, chat and /generate agree; the greedy token is the top one")

        # Stop strings: the text ends before the first match, finish_reason stop.
        long_ids, long_text, _ = reference(ids, 48)
        stop = long_text[len(long_text) // 2:len(long_text) // 2 + 3]
        if stop.strip():
            s = client.completions.create(model="tiny-chat", prompt=prompt, max_tokens=48, temperature=0, stop=[stop])
            assert s.choices[0].text == long_text[:long_text.find(stop)] and s.choices[0].finish_reason == "stop", (s, stop)
            streamed = "".join(ch.choices[0].text for ch in client.completions.create(
                model="tiny-chat", prompt=prompt, max_tokens=48, temperature=0, stop=stop, stream=True) if ch.choices)
            assert streamed == s.choices[0].text, (streamed, s.choices[0].text)
            gs = post(base + "/generate", {"text": prompt, "sampling_params": {"max_new_tokens": 48, "temperature": 0, "stop": stop}})
            assert gs["text"] == s.choices[0].text and gs["meta_info"]["finish_reason"] == {"type": "stop", "matched": stop}
            print(f"stop strings: text cut before {stop!r} (plain, streamed, /generate)")

        # Seeded sampling repeats; a different seed may not.
        a = client.completions.create(model="tiny-chat", prompt=prompt, max_tokens=16, temperature=0.9, seed=5).choices[0].text
        b = client.completions.create(model="tiny-chat", prompt=prompt, max_tokens=16, temperature=0.9, seed=5).choices[0].text
        assert a == b, (a, b)
        empty = client.completions.create(model="tiny-chat", prompt=prompt, max_tokens=0)  # as sglang: nothing generated
        assert empty.choices[0].text == "" and empty.usage.completion_tokens == 0, empty
        try:
            client.completions.create(model="tiny-chat", prompt=prompt, max_tokens=-1)
            raise AssertionError("max_tokens=-1 accepted")
        except openai.BadRequestError as e:
            assert "max_tokens" in str(e)
        print("seeded sampling repeats; errors reach the client as BadRequestError")

        # sglang's own benchmark client against the native /generate endpoint.
        try:
            import sglang.bench_serving  # noqa: F401
            have_sglang = True
        except Exception as e:  # noqa: BLE001
            print(f"sglang bench_serving unavailable ({e}); skipping that part")
            have_sglang = False
        if have_sglang:
            # Both of sglang's backends for a sglang server: native /generate and OpenAI
            # /v1/completions (which sends max_tokens 0 for its warm-up).
            for backend in ("sglang", "sglang-oai"):
                out_file = os.path.join(work, f"bench-{backend}.jsonl")
                b = subprocess.run([sys.executable, "-m", "sglang.bench_serving", "--backend", backend, "--host", "127.0.0.1",
                                    "--port", str(port), "--dataset-name", "random-ids", "--num-prompts", "32",
                                    "--random-input-len", "64", "--random-output-len", "16", "--tokenizer", model_dir,
                                    "--output-file", out_file, "--seed", "1"],
                                   capture_output=True, text=True, timeout=600)
                assert b.returncode == 0, backend + ": " + b.stdout[-3000:] + b.stderr[-3000:]
                assert "Serving Benchmark Result" in b.stdout, backend + ": " + b.stdout[-3000:]
                result = json.loads(open(out_file).read().splitlines()[-1])
                assert result["completed"] == 32, (backend, result)
                assert result["mean_ttft_ms"] > 0 and result["total_output_tokens"] > 0, (backend, result)
                print(f"sglang bench_serving --backend {backend}: {result['completed']} of 32 requests, "
                      f"{result['output_throughput']:.0f} tok/s, p99 TTFT {result['p99_ttft_ms']:.1f} ms")
        if args.bench:
            out_file = os.path.join(work, "aerie_bench.json")
            b = subprocess.run([args.bench, "serving", "--base-url", base, "--num-prompts", "64", "--random-input-len", "64",
                                "--random-output-len", "16", "--random-range-ratio", "1", "--max-concurrency", "32", "--output-file", out_file,
                                "--seed", "2", "--disable-progress"],
                               capture_output=True, text=True, timeout=600)
            assert b.returncode == 0, b.stdout[-3000:] + b.stderr[-3000:]
            assert "Serving Benchmark Result" in b.stdout, b.stdout
            result = json.load(open(out_file))
            assert result["completed"] == 64 and result["total_output_tokens"] == 64 * 16, result
            print(f"aerie-bench serving: {result['completed']} requests, p99 TTFT {result['p99_ttft_ms']:.1f} ms")
    print("openai_test: all checks passed")


if __name__ == "__main__":
    main()
