#!/usr/bin/env python3
"""256 concurrent streaming requests against aerie-serve (tiny model, CPU) through
`aerie-bench serving`: every request completes and the p99 time to first token is under 1 s.

  serving_load_test.py --serve BIN/aerie-serve --bench BIN/aerie-bench
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_process import running_server  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--serve", required=True)
    ap.add_argument("--bench", required=True)
    ap.add_argument("--p99-ttft-ms", type=float, default=1000.0)
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
        assert r["p99_ttft_ms"] < args.p99_ttft_ms, f"p99 TTFT {r['p99_ttft_ms']:.0f} ms >= {args.p99_ttft_ms:.0f} ms"
        print(f"256 concurrent streams: p99 TTFT {r['p99_ttft_ms']:.0f} ms, {r['output_throughput']:.0f} output tok/s")


if __name__ == "__main__":
    main()
