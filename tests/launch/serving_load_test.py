#!/usr/bin/env python3
"""256 concurrent streaming requests against aerie-serve (tiny model, CPU) through
`aerie-bench serving`: every request completes and they overlap; then 64 concurrent greedy
/generate requests return exactly aerie-generate's tokens. Correctness only: the latency figures
are printed (and measured by `aerie-bench serving` in docs/performance.md), never asserted,
since CI machines are shared.

  serving_load_test.py --serve BIN/aerie-serve --bench BIN/aerie-bench --generate BIN/aerie-generate
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_process import greedy_reference, running_server  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--serve", required=True)
    ap.add_argument("--bench", required=True)
    ap.add_argument("--generate", required=True)
    args = ap.parse_args()
    with running_server(args.serve, ["--load-format", "dummy", "--max-total-tokens", "65536"]) as (_, port):
        out_file = os.path.join(tempfile.mkdtemp(prefix="aerie_load_"), "result.json")
        cmd = [args.bench, "serving", "--port", str(port), "--num-prompts", "256", "--random-input-len", "64",
               "--random-output-len", "32", "--random-range-ratio", "0.5", "--output-file", out_file, "--seed", "1"]
        b = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        print(b.stdout)
        assert b.returncode == 0, b.stderr[-3000:]
        r = json.load(open(out_file))
        assert r["completed"] == 256 and r["failed"] == 0, r
        assert r["concurrency"] > 128, f"requests did not overlap: concurrency {r['concurrency']:.1f}"
        print(f"256 concurrent streams: p99 TTFT {r['p99_ttft_ms']:.0f} ms, {r['output_throughput']:.0f} output tok/s (not asserted)")
        import random
        import urllib.request
        from concurrent.futures import ThreadPoolExecutor
        rng = random.Random(7)
        prompts = [[rng.randrange(3, 500) for _ in range(rng.randint(4, 40))] for _ in range(64)]
        want = greedy_reference(args.generate, prompts, 16)

        def ask(ids):
            body = json.dumps({"input_ids": ids, "sampling_params": {"max_new_tokens": 16, "temperature": 0, "ignore_eos": True}}).encode()
            req = urllib.request.Request(f"http://127.0.0.1:{port}/generate", data=body, headers={"Content-Type": "application/json"})
            return json.loads(urllib.request.urlopen(req, timeout=300).read())["output_ids"]

        with ThreadPoolExecutor(64) as pool:
            got = list(pool.map(ask, prompts))
        assert got == want, "concurrent greedy requests differ from aerie-generate's tokens"
        print("64 concurrent greedy requests: tokens identical to aerie-generate")


if __name__ == "__main__":
    main()
