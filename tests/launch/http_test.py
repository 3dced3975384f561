#!/usr/bin/env python3
"""aerie-serve's HTTP API: /generate answers equal aerie-generate's (64 concurrent requests),
streams (sglang's cumulative chunks) add up to the same, /v1/models, /get_server_info and
/metrics answer, every malformed request (each item of the validation list, on /generate and
the OpenAI endpoints) gets a 4xx JSON error with a code and /health_generate stays 200
afterwards, and SIGTERM stops the server cleanly.

  http_test.py --serve BIN/aerie-serve --generate BIN/aerie-generate
"""
import argparse
import concurrent.futures
import gzip
import resource
import json
import re
import os
import random
import socket
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_process import greedy_reference, running_server  # noqa: E402


def call(url, body=None, raw=None):
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    req = urllib.request.Request(url, data=data, method="POST" if data is not None else "GET",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def wait_running(base, n):
    """Waits (up to ~5 s of polls) until /metrics shows at least n requests running."""
    for _ in range(500):
        running = re.search(r"^sglang:num_running_reqs(?:{[^}]*})? (\S+)", call_text(base + "/metrics")[1], re.M)
        if running and float(running.group(1)) >= n:
            return
        time.sleep(0.01)
    raise AssertionError(f"fewer than {n} requests ever showed as running")


def raw_exchange(port, data):
    """Sends raw bytes on one connection and reads until the server closes it."""
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.sendall(data)
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    return reply


def call_text(url):
    with urllib.request.urlopen(url, timeout=60) as r:
        return r.status, r.read().decode()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--serve", required=True)
    ap.add_argument("--generate", required=True)
    args = ap.parse_args()
    rng = random.Random(9)
    prompts = [[rng.randrange(3, 500) for _ in range(rng.randint(1, 40))] for _ in range(64)]
    expected = greedy_reference(args.generate, prompts, 8)

    with running_server(args.serve, ["--load-format", "dummy", "--max-total-tokens", "4096"]) as (base, port):
        status, models = call(base + "/v1/models")
        assert status == 200 and models["data"][0]["id"] == "tiny", models
        status, info = call(base + "/get_server_info")
        assert status == 200 and info["dp_size"] == 1, info

        # n parallel samples: sample i is the request with seed + i (a reference: each run alone).
        def sampled(body_seed, extra=None):
            body = {"input_ids": prompts[0], "sampling_params": {"max_new_tokens": 8, "temperature": 1.0, "seed": body_seed,
                                                                 "ignore_eos": True, **(extra or {})}}
            return call(base + "/generate", body)
        status, many = sampled(41, {"n": 3})
        assert status == 200 and isinstance(many, list) and len(many) == 3, (status, many)
        alone = [sampled(41 + i)[1]["output_ids"] for i in range(3)]
        assert [m["output_ids"] for m in many] == alone, (many, alone)
        assert len({tuple(a) for a in alone}) > 1, "three seeds sampled the same tokens"
        # The samples shared the prompt's K/V: the second and third prefilled only its last token.
        assert [m["meta_info"]["cached_tokens"] for m in many] == [0] + [len(prompts[0]) - 1] * 2, [m["meta_info"] for m in many]
        status, oai = call(base + "/v1/completions", {"prompt": prompts[0], "max_tokens": 8, "temperature": 1.0, "seed": 41, "n": 3,
                                                      "ignore_eos": True})
        assert status == 200 and [c["index"] for c in oai["choices"]] == [0, 1, 2], oai
        assert oai["usage"]["completion_tokens"] == 24, oai["usage"]
        # Streamed n: each sample's chunks carry its index (sglang: "index", OpenAI: choices[].index),
        # and sample i's tokens are still those of seed + i; OpenAI's usage comes once, summed.
        def sse(path, body):
            req = urllib.request.Request(base + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
            events = []
            with urllib.request.urlopen(req, timeout=120) as r:
                for raw in r:
                    line = raw.decode().strip()
                    if line.startswith("data: "):
                        events.append(line[6:])
            assert events[-1] == "[DONE]", events[-3:]
            return [json.loads(e) for e in events[:-1]]
        events = sse("/generate", {"input_ids": prompts[0], "stream": True,
                                   "sampling_params": {"max_new_tokens": 8, "temperature": 1.0, "seed": 41, "ignore_eos": True, "n": 3}})
        last = {e["index"]: e["output_ids"] for e in events}
        assert [last[i] for i in range(3)] == alone, (last, alone)
        # Submitted as one group, the streamed samples share the prompt too.
        cached = {e["index"]: e["meta_info"]["cached_tokens"] for e in events}
        assert [cached[i] for i in range(3)] == [0] + [len(prompts[0]) - 1] * 2, cached
        events = sse("/v1/completions", {"prompt": prompts[0], "max_tokens": 8, "temperature": 1.0, "seed": 41, "n": 3, "ignore_eos": True,
                                         "stream": True, "stream_options": {"include_usage": True}})
        usage = [e for e in events if not e["choices"]]
        assert len(usage) == 1 and usage[0]["usage"]["completion_tokens"] == 24, usage
        finished = sorted(c["index"] for e in events for c in e["choices"] if c["finish_reason"])
        assert finished == [0, 1, 2], events
        print("n = 3: the samples equal three requests with seeds s, s+1, s+2 (sglang list, OpenAI choices; streamed too)")

        def one(i):
            return call(base + "/generate", {"rid": f"q{i}", "input_ids": prompts[i],
                                             "sampling_params": {"max_new_tokens": 8, "temperature": 0, "ignore_eos": True}})
        with concurrent.futures.ThreadPoolExecutor(64) as pool:
            results = list(pool.map(one, range(len(prompts))))
        for i, (status, r) in enumerate(results):
            assert status == 200, (i, r)
            assert r["output_ids"] == expected[i], f"request {i}: {r['output_ids']} != {expected[i]}"
            assert r["meta_info"]["id"] == f"q{i}" and r["meta_info"]["completion_tokens"] == 8
        print(f"{len(prompts)} concurrent /generate requests equal aerie-generate")

        # Streaming: server-sent events, each with the output so far (sglang's default).
        def stream(i):
            body = json.dumps({"input_ids": prompts[i], "stream": True,
                               "sampling_params": {"max_new_tokens": 8, "temperature": 0, "ignore_eos": True}}).encode()
            req = urllib.request.Request(base + "/generate", data=body, headers={"Content-Type": "application/json"})
            ids, final, done, grew = [], None, False, True
            with urllib.request.urlopen(req, timeout=120) as r:
                assert r.headers["Content-Type"].startswith("text/event-stream")
                for raw in r:
                    line = raw.decode().strip()
                    if not line.startswith("data: "):
                        continue
                    if line == "data: [DONE]":
                        done = True
                        break
                    ev = json.loads(line[6:])
                    grew = grew and len(ev["output_ids"]) >= len(ids) and ev["output_ids"][:len(ids)] == ids
                    ids = ev["output_ids"]
                    assert ev["meta_info"]["completion_tokens"] == len(ids)
                    final = ev
            return ids, final, done and grew
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            streamed = list(pool.map(stream, range(16)))
        for i, (ids, final, done) in enumerate(streamed):
            assert done and ids == expected[i] and final["meta_info"]["finish_reason"]["type"] == "length", (i, ids, final)
        print("16 concurrent streams grow to the same tokens and end with [DONE]")

        # A client that disconnects mid-stream: its request is aborted, the server carries on.
        for _ in range(8):
            s = socket.create_connection(("127.0.0.1", port))
            body = json.dumps({"input_ids": [1, 2, 3], "stream": True, "sampling_params": {"max_new_tokens": 3000, "temperature": 0,
                                                                                            "ignore_eos": True}})
            s.sendall(f"POST /generate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n{body}".encode())
            s.settimeout(60)
            got = b""
            while b"data:" not in got:
                chunk = s.recv(4096)
                assert chunk, "stream closed before its first event"
                got += chunk
            s.close()
        status, r = call(base + "/generate", {"input_ids": prompts[0], "sampling_params": {"max_new_tokens": 8, "temperature": 0,
                                                                                          "ignore_eos": True}})
        assert status == 200 and r["output_ids"] == expected[0], r
        print("disconnected streams were dropped; the server still answers")

        # /flush_cache as sglang: GET, or POST with no body; /get_server_info reports the real KV pool.
        for method in ("GET", "POST"):
            req = urllib.request.Request(base + "/flush_cache", method=method, data=b"" if method == "POST" else None)
            with urllib.request.urlopen(req, timeout=30) as resp:
                assert resp.status == 200
        status, info = call(base + "/get_server_info")
        assert status == 200 and info["max_total_tokens"] > 0, info
        # OpenAI's max_tokens 0: an empty completion, answered at once (sglang does the same).
        status, r = call(base + "/v1/completions", {"model": "m", "prompt": prompts[0], "max_tokens": 0})
        assert status == 200 and r["choices"][0]["text"] == "" and r["usage"]["completion_tokens"] == 0, r
        # Client errors say what is wrong, without the server's source locations.
        status, r = call(base + "/generate", {"input_ids": "not a list"})
        assert status == 400 and ".cpp:" not in r["error"]["message"], r
        # Sampling without a seed differs between identical requests; with one it repeats.
        def sample(extra):
            body = {"input_ids": prompts[0], "sampling_params": {"max_new_tokens": 12, "temperature": 1.5, "ignore_eos": True, **extra}}
            status, r = call(base + "/generate", body)
            assert status == 200, r
            return tuple(r["output_ids"])
        unseeded = {sample({}) for _ in range(3)}
        assert len(unseeded) > 1, f"three unseeded requests sampled the same tokens: {unseeded}"
        assert sample({"seed": 5}) == sample({"seed": 5})
        print(f"unseeded sampling: {len(unseeded)} different outputs of 3; a seed reproduces")

        # /abort_request ends a long request early; unknown ids are 404; a second request with the
        # rid of one in progress is refused (409), not mixed up with it.
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            long = pool.submit(call, base + "/generate", {"rid": "long-one", "input_ids": [1, 2, 3],
                                                         "sampling_params": {"max_new_tokens": 3000, "temperature": 0,
                                                                             "ignore_eos": True}})
            # Only once the long request runs (a duplicate sent earlier would take the rid first).
            wait_running(base, 1)
            status, r = call(base + "/generate", {"rid": "long-one", "input_ids": [4], "sampling_params": {"max_new_tokens": 1}})
            assert status == 409 and r["error"]["code"] == "rid_in_use", f"a duplicate rid was not refused: {status} {r}"
            for _ in range(200):
                status, _ = call(base + "/abort_request", {"rid": "long-one"})
                if status == 200:
                    break
                time.sleep(0.01)
            assert status == 200, "the long request never became abortable"
            status, r = long.result(timeout=120)
        assert status == 200 and r["meta_info"]["finish_reason"]["type"] == "abort", r
        assert r["meta_info"]["completion_tokens"] < 3000, r["meta_info"]
        assert call(base + "/abort_request", {"rid": "nobody"})[0] == 404
        print(f"/abort_request ended a request after {r['meta_info']['completion_tokens']} of 3000 tokens; a duplicate rid got 409")
        # With n samples, /abort_request ends every one of them.
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            both = pool.submit(call, base + "/generate", {"rid": "long-two", "input_ids": [1, 2, 3],
                                                         "sampling_params": {"n": 2, "max_new_tokens": 3000, "temperature": 0,
                                                                             "ignore_eos": True}})
            wait_running(base, 2)
            assert call(base + "/abort_request", {"rid": "long-two"})[0] == 200
            status, r = both.result(timeout=120)
        assert status == 200 and [x["meta_info"]["finish_reason"]["type"] for x in r] == ["abort", "abort"], r
        print("/abort_request ended both samples of an n = 2 request")
        # Ids the server makes are unguessable (128 random bits), not a counter.
        ids = {call(base + "/generate", {"input_ids": [1], "sampling_params": {"max_new_tokens": 1}})[1]["meta_info"]["id"]
               for _ in range(3)}
        assert len(ids) == 3 and all(len(i) == 32 and int(i, 16) >= 0 for i in ids), ids

        status, metrics = call_text(base + "/metrics")
        assert status == 200, metrics
        for needle in ["sglang:num_requests_total", "sglang:time_to_first_token_seconds_bucket", "sglang:num_running_reqs",
                       "sglang:token_usage", "sglang:e2e_request_latency_seconds_count", "sglang:inter_token_latency_seconds",
                       "sglang:num_aborted_requests_total", "sglang:queue_time_seconds_bucket", "sglang:gen_throughput", "sglang:cache_hit_rate",
                       "sglang:num_used_tokens", "sglang:prompt_tokens_total"]:
            assert needle in metrics, needle
        done = [l for l in metrics.splitlines() if l.startswith("sglang:generation_tokens_total")]
        assert done and float(done[0].split()[-1]) >= 8 * 64, done
        print("/metrics: Prometheus text with counters, gauges and latency histograms")

        status, r = call(base + "/generate", {"input_ids": [1, 2], "sampling_params": {"max_new_tokens": 0}})
        assert status == 200 and r["output_ids"] == [] and r["meta_info"]["finish_reason"]["type"] == "length", r
        print("max_new_tokens 0 is answered with no tokens, as sglang does")

        bad = [
            ("malformed JSON", None, b"{oops", 400, "invalid_json"),
            ("invalid UTF-8", None, b'{"text": "\xff\xfe", "sampling_params": {"max_new_tokens": 1}}', 400, "invalid_json"),
            ("NaN temperature", None, b'{"input_ids": [1], "sampling_params": {"temperature": NaN}}', 400, "invalid_json"),
            ("known field of the wrong type", {"input_ids": [1], "stream": "yes"}, None, 400, "invalid_request"),
            ("stop of the wrong type", {"input_ids": [1], "sampling_params": {"stop": 5}}, None, 400, "invalid_request"),
            ("wrong type", {"input_ids": [1], "sampling_params": {"max_new_tokens": "8"}}, None, 400, "invalid_request"),
            ("empty prompt", {"input_ids": []}, None, 400, "invalid_request"),
            ("empty text", {"text": ""}, None, 400, "invalid_request"),
            ("token outside vocab", {"input_ids": [1, 99999]}, None, 400, "invalid_request"),
            ("max_new_tokens < 0", {"input_ids": [1], "sampling_params": {"max_new_tokens": -1}}, None, 400, "invalid_request"),
            ("temperature < 0", {"input_ids": [1], "sampling_params": {"temperature": -1}}, None, 400, "invalid_request"),
            ("top_p outside (0,1]", {"input_ids": [1], "sampling_params": {"top_p": 1.5}}, None, 400, "invalid_request"),
            ("prompt longer than the context", {"input_ids": [1] * 5000}, None, 400, "invalid_request"),
            ("max_new_tokens too large", {"input_ids": [1], "sampling_params": {"max_new_tokens": 10 ** 9}}, None, 400, "invalid_request"),
            ("oversized body", None, b"[" + b"1," * (9 << 20) + b"1]", 413, "payload_too_large"),
            # hostile: nesting that crashed a recursive walk, a count that overflowed the length check,
            # an integer past its field's range (was truncated)
            ("150,000 nested levels", None, b'{"input_ids": [1], "sampling_params": ' + b"[" * 150000 + b"]" * 150000 + b"}", 400,
             "invalid_json"),
            ("max_new_tokens 2^63-1", {"input_ids": [1], "sampling_params": {"max_new_tokens": 2 ** 63 - 1}}, None, 400,
             "invalid_request"),
            ("top_logprobs_num 2^32+1", {"input_ids": [1], "return_logprob": True, "top_logprobs_num": 2 ** 32 + 1}, None, 400,
             "invalid_request"),
            # the OpenAI endpoints share the checks
            ("completions: max_tokens < 0", {"prompt": [1, 2], "max_tokens": -1}, None, 400, "invalid_request", "/v1/completions"),
            ("completions: max_tokens too large", {"prompt": [1, 2], "max_tokens": 10 ** 6}, None, 400, "invalid_request",
             "/v1/completions"),
            ("completions: temperature < 0", {"prompt": [1], "temperature": -0.1}, None, 400, "invalid_request", "/v1/completions"),
            ("completions: top_p outside (0,1]", {"prompt": [1], "top_p": 0}, None, 400, "invalid_request", "/v1/completions"),
            ("completions: ids outside the vocabulary", {"prompt": [70000]}, None, 400, "invalid_request", "/v1/completions"),
            ("completions: empty prompt", {"prompt": []}, None, 400, "invalid_request", "/v1/completions"),
            ("completions: prompt too long", {"prompt": [1] * 5000}, None, 400, "invalid_request", "/v1/completions"),
            ("completions: NaN", None, b'{"prompt": [1], "top_p": NaN}', 400, "invalid_json", "/v1/completions"),
            ("chat: no tokenizer", {"messages": [{"role": "user", "content": "hi"}]}, None, 400, "invalid_request",
             "/v1/chat/completions"),
            ("chat: malformed JSON", None, b'{"messages": [', 400, "invalid_json", "/v1/chat/completions"),
        ]
        for name, body, raw, want, code, *path in bad:
            status, r = call(base + (path[0] if path else "/generate"), body, raw)
            assert status == want and r["error"]["code"] == code, f"{name}: {status} {r}"
            status, _ = call(base + "/health_generate")
            assert status == 200, f"unhealthy after {name}"
        print(f"{len(bad)} malformed requests answered with 4xx JSON errors; /health_generate stayed 200")

        # Bodies the size cap cannot see coming: gzip is refused before it is read (20 KB here that
        # inflate past the 16 MB cap; the 1 MB inflated to 1 GB); a chunked body is capped
        # while it is read (413 at 16 MB), and one under the cap is served.
        gz = gzip.compress(b'{"input_ids": [' + b" " * (20 << 20) + b'1]}', compresslevel=1)
        raw_requests = [
            (b"POST /generate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\n"
             + f"Content-Length: {len(gz)}\r\n\r\n".encode() + gz, 415, "unsupported_encoding"),
            # a header value quoted in the error message stays inside its JSON string
            (b'POST /generate HTTP/1.1\r\nHost: x\r\nContent-Encoding: x"}, "injected": {"\r\nContent-Length: 2\r\n\r\n{}',
             415, "unsupported_encoding"),
            (b"POST /generate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
             + b"".join(b"%x\r\n" % (1 << 20) + b" " * (1 << 20) + b"\r\n" for _ in range(20)) + b"0\r\n\r\n", 413, "payload_too_large"),
        ]
        for raw, want, code in raw_requests:
            with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
                try:
                    sock.sendall(raw)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the server may answer and close before all of it is sent
                reply = b""
                while b"\r\n\r\n" not in reply or not reply.rstrip().endswith(b"}"):
                    try:
                        chunk = sock.recv(65536)
                    except ConnectionResetError:
                        break
                    if not chunk:
                        break
                    reply += chunk
            head, _, body = reply.partition(b"\r\n\r\n")
            length = int(re.search(rb"Content-Length: (\d+)", head).group(1))
            parsed = json.loads(body[:length])
            assert head.startswith(f"HTTP/1.1 {want}".encode()) and parsed["error"]["code"] == code and list(parsed) == ["error"], reply[:400]
            assert b"Connection: close" in head, head
            assert call(base + "/health_generate")[0] == 200
        small = json.dumps({"input_ids": prompts[0], "sampling_params": {"max_new_tokens": 8, "temperature": 0, "ignore_eos": True}}).encode()
        reply = raw_exchange(port, b"POST /generate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                             + b"%x\r\n" % len(small) + small + b"\r\n0\r\n\r\n")
        assert reply.startswith(b"HTTP/1.1 200") and json.loads(reply.partition(b"\r\n\r\n")[2])["output_ids"] == expected[0], reply[:300]
        print("gzip bodies are refused before they are read (415); chunked ones are capped while read (413) or served")

        # Pipelined requests on one connection are answered, in order.
        one_req = (b"POST /generate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   + f"Content-Length: {len(small)}\r\n\r\n".encode() + small)
        reply = raw_exchange(port, one_req + b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n" + one_req.replace(b"Host: x", b"Host: x\r\nConnection: close"))
        heads = re.findall(rb"HTTP/1\.1 (\d+)", reply)
        assert heads == [b"200", b"200", b"200"], reply[:600]
        assert reply.count(json.dumps(expected[0]).replace(" ", "").encode()) == 2, reply[:600]
        print("three pipelined requests on one connection were answered in order")

        # A non-streaming request whose client disconnects is aborted and its pages freed.
        def gauge(name):
            text = call_text(base + "/metrics")[1]
            return float(re.search(rf"^{re.escape(name)}\{{[^}}]*\}} (\S+)$", text, re.M).group(1))
        aborted = gauge("sglang:num_aborted_requests_total")
        long_body = json.dumps({"input_ids": [1, 2, 3], "sampling_params": {"max_new_tokens": 3000, "temperature": 0, "ignore_eos": True}})
        with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
            sock.sendall(f"POST /generate HTTP/1.1\r\nHost: x\r\nContent-Length: {len(long_body)}\r\n\r\n{long_body}".encode())
            deadline = time.time() + 60
            while gauge("sglang:num_running_reqs") < 1:
                assert time.time() < deadline, "the long request never ran"
                time.sleep(0.05)
        deadline = time.time() + 30
        while gauge("sglang:num_running_reqs") > 0 or gauge("sglang:num_aborted_requests_total") < aborted + 1:
            assert time.time() < deadline, "a disconnected non-streaming request kept running"
            time.sleep(0.05)
        print("a non-streaming request was aborted when its client disconnected")

        # Slow-loris: 2,000 sockets that send half a header and wait hold no handler thread;
        # /health still answers (cpp-httplib's thread per connection hung it for 90 s).
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4096)), hard))
        loris = []
        try:
            for _ in range(2000):
                sock = socket.create_connection(("127.0.0.1", port), timeout=30)
                sock.sendall(b"POST /generate HTTP/1.1\r\nHost: x\r\nContent-Le")
                loris.append(sock)
            t0 = time.time()
            with urllib.request.urlopen(base + "/health", timeout=20) as r:
                assert r.status == 200
            took = time.time() - t0
            for sock in loris[:100]:  # a trickle keeps them alive; still no thread each
                sock.sendall(b"n")
            assert call(base + "/health_generate")[0] == 200
        finally:
            for sock in loris:
                sock.close()
        print(f"/health answered in {took:.3f} s beside 2,000 slow-loris sockets")
    print("http_test: all checks passed")


if __name__ == "__main__":
    main()
