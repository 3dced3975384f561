#!/usr/bin/env python3
"""aerie-serve started with a typical sglang launch line (more than 15 of its ServerArgs flags,
aliases included) serves; flags for features Aerie lacks are either accepted with a one-line
warning or refused with what is unsupported; --api-key guards every endpoint but /health;
--context-length caps requests; --log-requests logs each finished request.

  sglang_cli_test.py --serve BIN/aerie-serve
"""
import argparse
import json
import os
import subprocess
import sys
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_process import running_server  # noqa: E402

SGLANG_LINE = [
    "--model-shape", "tiny", "--load-format", "dummy", "--tp", "1", "--dp", "1", "--dtype", "float", "--trust-remote-code", "--context-length", "256",
    "--mem-fraction-static", "0.8", "--max-running-requests", "16", "--max-total-tokens", "4096", "--chunked-prefill-size", "128",
    "--page-size", "1", "--disable-radix-cache", "--enable-metrics", "--log-level", "info", "--log-requests", "--skip-server-warmup",
    "--api-key", "sk-test", "--served-model-name", "tinyllama", "--random-seed", "1", "--cuda-graph-max-bs", "8",
    "--schedule-policy", "fcfs", "--attention-backend", "triton", "--stream-interval", "1", "--watchdog-timeout", "120",
    "--kv-cache-dtype", "auto", "--disable-overlap-schedule", "--enable-mixed-chunk", "--tokenizer-mode", "auto",
]


def call(url, body=None, key=None):
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    req = urllib.request.Request(url, data=json.dumps(body).encode() if body is not None else None, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--serve", required=True)
    args = ap.parse_args()
    flags = [f for f in SGLANG_LINE if f.startswith("--")]
    assert len(flags) >= 15, len(flags)
    line = SGLANG_LINE
    log = "/tmp/aerie-sglang-cli.log"
    with open(log, "w") as err:
        with running_server(args.serve, line, startup_s=120, stderr=err) as (url, _):
            gen = {"input_ids": [5, 6, 7], "sampling_params": {"max_new_tokens": 4, "temperature": 0}}
            status, body = call(url + "/generate", gen, key="sk-test")
            assert status == 200 and len(body["output_ids"]) == 4, (status, body)
            status, body = call(url + "/generate", gen)
            assert status == 401 and body["error"]["code"] == "unauthorized", (status, body)
            status, _ = call(url + "/generate", gen, key="wrong")
            assert status == 401, status
            assert call(url + "/health")[0] == 200  # the liveness probe needs no key
            assert call(url + "/v1/models")[0] == 401
            status, body = call(url + "/v1/models", key="sk-test")
            assert status == 200 and body["data"][0]["id"] == "tinyllama", body
            # --context-length 256: a request past it is refused.
            status, body = call(url + "/generate", {"input_ids": [5] * 200, "sampling_params": {"max_new_tokens": 100}}, key="sk-test")
            assert status == 400 and "256" in body["error"]["message"], (status, body)
            status, body = call(url + "/v1/completions",
                                {"prompt": [5, 6], "max_tokens": 2, "response_format": {"type": "json_object"}}, key="sk-test")
            assert status == 400 and "structured output" in body["error"]["message"], (status, body)
    text = open(log).read()
    for warned in ("--trust-remote-code is accepted but has no effect", "--disable-radix-cache is accepted", "--attention-backend triton"):
        assert warned in text, f"no warning '{warned}' in:\n{text[-3000:]}"
    assert "request " in text and "prompt + 4 output tokens, length" in text, f"no request log line in:\n{text[-3000:]}"
    print(f"aerie-serve took a sglang launch line of {len(flags)} flags, served with --api-key, warned about the no-op flags, "
          "logged the requests")
    # sglang's --model alias of --model-path.
    out = subprocess.run([args.serve, "--model", "/no/such/model"], capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "/no/such/model" in out.stderr, out.stderr[-1000:]
    for bad, message in ((["--quantization", "fp8"], "--quantization fp8 is not supported"),
                         (["--lora-paths", "a"], "LoRA adapters are not supported"),
                         (["--nnodes", "2"], "multi-node launches"),
                         (["--kv-cache-dtype", "fp8_e5m2"], "--kv-cache-dtype fp8_e5m2 is not supported"),
                         (["--tool-call-parser", "llama3"], "tool calls are not supported")):
        out = subprocess.run([args.serve, "--load-format", "dummy"] + bad, capture_output=True, text=True, timeout=60)
        assert out.returncode != 0 and message in out.stderr, (bad, out.returncode, out.stderr[-1000:])
        print(f"refused: {' '.join(bad)}: {message}")
    print("sglang_cli_test: all checks passed")


if __name__ == "__main__":
    sys.exit(main())
